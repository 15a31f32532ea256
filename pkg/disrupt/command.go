package disrupt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/cnibench/cnibench/pkg/atomicfile"
	"github.com/cnibench/cnibench/pkg/errkind"
)

// Formats are what `disrupt report --format` writes.
var Formats = []string{"text", "json", "html"}

// RunCommand is `cnibench disrupt run`: load and check the experiment,
// run it, print the text table, and write the result as JSON (-o) and
// HTML (--html) if asked.
type RunCommand struct {
	Ref  string
	JSON string // -o: the result document
	HTML string // --html: the page
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
	return errors.Join(append([]error{runErr}, errs...)...)
}

// ReportCommand is `cnibench disrupt report FILE`: a stored result
// rendered again.
type ReportCommand struct {
	File   string
	Format string
	Output string
}

// Run renders the report.
func (c *ReportCommand) Run(stdout io.Writer) error {
	if !slices.Contains(Formats, c.Format) {
		return errkind.Errorf(ErrInvalid, "--format %q: want one of text, json, html", c.Format)
	}
	data, err := os.ReadFile(c.File)
	if err != nil {
		return errkind.Errorf(ErrInvalid, "disrupt report: %v (give the JSON file `disrupt run -o` wrote)", err)
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil || r.Name == "" {
		return errkind.Errorf(ErrInvalid, "disrupt report: %s is not a disruption result (written by `cnibench disrupt run -o FILE`)", c.File)
	}
	if r.Schema != Schema {
		return errkind.Errorf(ErrInvalid, "disrupt report: %s has schema %q; this cnibench reads %q", c.File, r.Schema, Schema)
	}
	write := func(w io.Writer) error {
		switch c.Format {
		case "json":
			return writeJSON(w, &r)
		case "html":
			return WriteHTML(w, &r)
		}
		return WriteText(w, &r)
	}
	if c.Output == "" || c.Output == "-" {
		return write(stdout)
	}
	if err := atomicfile.Write(c.Output, 0o644, write); err != nil {
		return fmt.Errorf("disrupt report: %w", err)
	}
	return nil
}

func writeJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
