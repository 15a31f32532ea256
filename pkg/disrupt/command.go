package disrupt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/cnibench/cnibench/pkg/atomicfile"
	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/sysinfo"
)

// Formats are what `disrupt report --format` writes.
var Formats = []string{"text", "json", "html"}

// RunHelp is `cnibench disrupt run --help`'s description.
func RunHelp() string {
	return `Builds each arm's lab, keeps a UDP request/response probe and a connect-per-request
probe running through it at fixed rates (each request timestamped), fires the
experiment's events at fixed instants, and cuts the requests into a timeline of
buckets (answered rate, failures, timeouts, p50/p99), with per event the longest
gap, the requests lost, the time to recover and the agent's CPU. Every rule an
event changes is journaled before and checked byte for byte after its undo.

Ready experiments: ` + strings.Join(Ready(), ", ") + ` (docs/disruption.md).`
}

// RunExamples is `cnibench disrupt run --help`'s examples.
const RunExamples = `  cnibench disrupt run blackhole-resolution --html timeline.html
  cnibench disrupt run endpoint-change -o endpoint-change.json
  cnibench disrupt report last --format html -o timeline.html`

// RunCommand is `cnibench disrupt run`: load and check the experiment,
// run it, print the text table, write the result as JSON (-o) and HTML
// (--html) if asked, and store it in the results database.
type RunCommand struct {
	Ref     string
	JSON    string // -o: the result document
	HTML    string // --html: the page
	DB      string // --db: the results database
	Version string // cnibench's, stored with the run
}

// Run runs the command.
func (c *RunCommand) Run(ctx context.Context, stdout, stderr io.Writer) error {
	s, err := Load(c.Ref)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("disrupt run: needs root (it builds a lab); run with sudo")
	}
	// Opened before any lab is built: a --db that cannot be used fails
	// here, not after minutes of probing.
	db, err := store.Open(c.DB)
	if err != nil {
		return err
	}
	defer db.Close()
	res, runErr := Run(ctx, s, Options{Log: stderr})
	if res == nil || len(res.Arms) == 0 {
		return runErr
	}
	if runErr == nil {
		if err := WriteText(stdout, res); err != nil {
			return err
		}
	}
	var errs []error
	if c.JSON != "" {
		errs = append(errs, atomicfile.Write(c.JSON, 0o644, func(w io.Writer) error { return writeJSON(w, res) }))
	}
	if c.HTML != "" && runErr == nil {
		errs = append(errs, atomicfile.Write(c.HTML, 0o644, func(w io.Writer) error { return WriteHTML(w, res) }))
	}
	// Stored last: a database that fails loses nothing already printed
	// or written, and says so.
	if Measured(res) {
		run, err := Save(db, res, StoreOptions{Kind: KindLab, Version: c.Version, Host: sysinfo.Host.Fingerprint(c.Version), Err: runErr})
		if err != nil {
			errs = append(errs, fmt.Errorf("disrupt run: the result was not stored in %s: %w", db.Path(), err))
		} else {
			fmt.Fprintf(stderr, "stored as run %d (%s) in %s; read it back with: cnibench disrupt report %s\n", run.ID, run.Name, db.Path(), run.Name)
		}
	}
	return errors.Join(append([]error{runErr}, errs...)...)
}

// ReportCommand is `cnibench disrupt report FILE|RUN`: a result rendered
// again, from the JSON file `disrupt run -o` wrote or from the results
// database.
type ReportCommand struct {
	// Ref is a file, or else a run id, name or "last" in DB.
	Ref    string
	DB     string
	Format string
	Output string
}

// Run renders the report.
func (c *ReportCommand) Run(stdout io.Writer) error {
	if !slices.Contains(Formats, c.Format) {
		return errkind.Errorf(ErrInvalid, "--format %q: want one of text, json, html", c.Format)
	}
	r, err := c.load()
	if err != nil {
		return err
	}
	write := func(w io.Writer) error {
		switch c.Format {
		case "json":
			return writeJSON(w, r)
		case "html":
			return WriteHTML(w, r)
		}
		return WriteText(w, r)
	}
	if c.Output == "" || c.Output == "-" {
		return write(stdout)
	}
	if err := atomicfile.Write(c.Output, 0o644, write); err != nil {
		return fmt.Errorf("disrupt report: %w", err)
	}
	return nil
}

// load reads the result Ref names: a file when one is there (or the name
// ends in .json), else a stored run.
func (c *ReportCommand) load() (*Result, error) {
	if st, err := os.Stat(c.Ref); (err == nil && !st.IsDir()) || strings.HasSuffix(c.Ref, ".json") {
		return readFile(c.Ref)
	}
	db, err := store.OpenExisting(c.DB)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	r, _, err := Stored(db, c.Ref)
	return r, err
}

func readFile(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errkind.Errorf(ErrInvalid, "disrupt report: %v (give the JSON file `disrupt run -o` wrote, or a stored run)", err)
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil || r.Name == "" {
		return nil, errkind.Errorf(ErrInvalid, "disrupt report: %s is not a disruption result (written by `cnibench disrupt run -o FILE`)", path)
	}
	if r.Schema != Schema {
		return nil, errkind.Errorf(ErrInvalid, "disrupt report: %s has schema %q; this cnibench reads %q", path, r.Schema, Schema)
	}
	return &r, nil
}

func writeJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
