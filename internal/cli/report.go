package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/store"
)

// The history commands: `cnibench runs`, `cnibench report`, `cnibench compare`.

// addDBFlag adds --db to a command that reads or writes the results
// database. Its default honours $CNIBENCH_DB and $XDG_DATA_HOME.
func addDBFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "db", store.DefaultPath(), "results database (SQLite file; env CNIBENCH_DB)")
}

// openExistingDB opens a results database for reading. It does not create
// one: a typo in --db must not leave an empty database behind.
func openExistingDB(path string) (*store.DB, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, UsageError{fmt.Errorf("no results database at %s: run an experiment first (cnibench run), or point --db at one", path)}
	}
	return store.Open(path)
}

// getRun resolves a run reference with an error that says what to do.
func getRun(db *store.DB, ref string) (*store.Run, []store.Sample, error) {
	r, err := db.GetRun(ref)
	if errors.Is(err, store.ErrNotFound) {
		if ref == "last" {
			return nil, nil, UsageError{fmt.Errorf("no runs stored in %s yet: run an experiment first (cnibench run)", db.Path())}
		}
		return nil, nil, UsageError{fmt.Errorf("unknown run %q in %s: list stored runs with `cnibench runs`", ref, db.Path())}
	}
	if err != nil {
		return nil, nil, err
	}
	ss, err := db.Samples(r.ID)
	if err != nil {
		return nil, nil, err
	}
	return r, ss, nil
}

// runSource resolves run references, each either REF (id, name or "last")
// in the --db database, or FILE:REF in another results database — so runs
// taken on different hosts, each with its own database, can be reported
// side by side or compared without merging the files.
type runSource struct {
	defaultPath string
	dbs         map[string]*store.DB
}

func newRunSource(defaultPath string) *runSource {
	return &runSource{defaultPath: defaultPath, dbs: map[string]*store.DB{}}
}

func (s *runSource) get(ref string) (*store.Run, []store.Sample, error) {
	db, ref, err := s.resolve(ref)
	if err != nil {
		return nil, nil, err
	}
	return getRun(db, ref)
}

// resolve opens (once) the database a reference names and returns the
// reference within it.
func (s *runSource) resolve(ref string) (*store.DB, string, error) {
	path := s.defaultPath
	if i := strings.LastIndex(ref, ":"); i > 0 {
		if st, err := os.Stat(ref[:i]); err == nil && !st.IsDir() {
			path, ref = ref[:i], ref[i+1:]
		}
	}
	db, ok := s.dbs[path]
	if !ok {
		var err error
		if db, err = openExistingDB(path); err != nil {
			return nil, "", err
		}
		s.dbs[path] = db
	}
	return db, ref, nil
}

func (s *runSource) Close() {
	for _, db := range s.dbs {
		db.Close()
	}
}

func argsAtLeast(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return UsageError{fmt.Errorf("missing %s: give a run id, name or \"last\" (see `cnibench runs`)", what)}
		}
		return nil
	}
}

func newRunsCmd() *cobra.Command {
	var dbPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the runs stored in the results database",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return UsageError{fmt.Errorf("runs takes no arguments (got %q); use `cnibench report <run>` to see one", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
				if asJSON {
					_, err := io.WriteString(out, "[]\n")
					return err
				}
				_, err := fmt.Fprintf(out, "no runs stored in %s yet; run an experiment with `cnibench run experiments/default.yaml`\n", dbPath)
				return err
			}
			db, err := store.Open(dbPath)
			if err != nil {
				return err
			}
			defer db.Close()
			runs, err := db.Runs()
			if err != nil {
				return err
			}
			counts, err := db.SampleCounts()
			if err != nil {
				return err
			}
			if asJSON {
				return writeRunsJSON(out, runs, counts)
			}
			if len(runs) == 0 {
				_, err := fmt.Fprintf(out, "no runs stored in %s yet; run an experiment with `cnibench run experiments/default.yaml`\n", dbPath)
				return err
			}
			return writeRunsTable(out, runs, counts)
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array instead of a table")
	return cmd
}

// RunListing is one entry of `cnibench runs --json`.
type RunListing struct {
	ID       int64              `json:"id"`
	Name     string             `json:"name"`
	Kind     string             `json:"kind"`
	Started  time.Time          `json:"started"`
	Finished *time.Time         `json:"finished"`
	Complete bool               `json:"complete"`
	Status   string             `json:"status"`
	Baseline string             `json:"baseline"`
	Arms     []string           `json:"arms"`
	Samples  int                `json:"samples"`
	Host     result.Fingerprint `json:"host"`
	Labels   map[string]string  `json:"labels"`
}

func writeRunsJSON(w io.Writer, runs []store.Run, counts map[int64]int) error {
	list := make([]RunListing, 0, len(runs))
	for _, r := range runs {
		l := RunListing{ID: r.ID, Name: r.Name, Kind: r.Kind, Started: r.Started.UTC(), Complete: r.Complete,
			Status: r.Status, Baseline: r.Baseline, Arms: []string{}, Samples: counts[r.ID], Host: r.Host, Labels: r.Labels}
		if !r.Finished.IsZero() {
			f := r.Finished.UTC()
			l.Finished = &f
		}
		for _, a := range r.Arms {
			l.Arms = append(l.Arms, a.Name)
		}
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		list = append(list, l)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(list)
}

func writeRunsTable(w io.Writer, runs []store.Run, counts map[int64]int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tKIND\tSTARTED (UTC)\tSTATE\tARMS\tSAMPLES\tHOST\tKERNEL")
	for _, r := range runs {
		state := "complete"
		if !r.Complete {
			state = "incomplete"
			if r.Finished.IsZero() {
				state = "running or killed"
			}
		}
		var arms []string
		for _, a := range r.Arms {
			arms = append(arms, a.Name)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Name, r.Kind, r.Started.UTC().Format("2006-01-02 15:04"),
			state, strings.Join(arms, ","), counts[r.ID], dash(r.Host.Hostname), dash(r.Host.Kernel))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newReportCmd() *cobra.Command {
	var dbPath, format, outPath, baseline string
	cmd := &cobra.Command{
		Use:   "report <run>...",
		Short: "Render stored runs as a table, markdown, JSON, CSV or HTML",
		Long: `Render one run (by id, name or "last") in the shape of the source documents:
arms as rows, each test's metric as columns, median ±95% CI and the ratio to the
baseline arm. Several runs are put side by side with their host fingerprints
(kernel, distro, CPU), e.g. the same experiment on different distros.
A run is REF (id, name or "last") in --db, or FILE:REF in another results database.`,
		Example: `  cnibench report last
  cnibench report 12 --format html -o report.html
  cnibench report ubuntu20-run opensuse15-run --format markdown
  cnibench report ubuntu.db:last opensuse.db:last     # runs from two hosts' databases`,
		Args: argsAtLeast(1, "run to report on"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !validFormat(format) {
				return UsageError{fmt.Errorf("unknown --format %q; use one of %s", format, strings.Join(report.Formats, ", "))}
			}
			src := newRunSource(dbPath)
			defer src.Close()
			var in []report.Input
			var sts []*stages.Report
			for _, ref := range args {
				r, ss, err := src.get(ref)
				if err != nil {
					return err
				}
				if baseline != "" {
					if err := rebase(r, baseline); err != nil {
						return UsageError{err}
					}
				}
				st, err := src.stages(ref, r, ss)
				if err != nil {
					return err
				}
				in = append(in, report.Input{Run: r, Samples: ss})
				sts = append(sts, st)
			}
			return writeOutput(cmd.OutOrStdout(), outPath, func(w io.Writer) error {
				return report.RenderRunsStages(w, format, in, sts)
			})
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().StringVar(&baseline, "baseline", "", "compare every arm with this one instead of the run's baseline (ratios and verdicts)")
	cmd.Flags().StringVarP(&format, "format", "f", report.FormatTable, "output format: "+strings.Join(report.Formats, "|"))
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout")
	return cmd
}

func newCompareCmd() *cobra.Command {
	var dbPath, outPath, format string
	var gate *report.Gate
	var failOn, junit string
	cmd := &cobra.Command{
		Use:   "compare <run-a> <run-b>",
		Short: "Compare two runs cell by cell with a significance test",
		Long: `For every arm, test and message size measured in both runs, print both medians,
the change from A to B in percent, the Mann–Whitney U p-value over the repeats and
a verdict: faster/slower by X% when p < 0.05, "no significant difference" otherwise.
A run is REF (id, name or "last") in --db, or FILE:REF in another results database.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return UsageError{fmt.Errorf("compare needs exactly two runs (got %d): cnibench compare <run-a> <run-b>; list runs with `cnibench runs`", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !contains(report.CompareFormats, format) {
				return UsageError{fmt.Errorf("unknown --format %q for compare; use one of %s", format, strings.Join(report.CompareFormats, ", "))}
			}
			src := newRunSource(dbPath)
			defer src.Close()
			ra, sa, err := src.get(args[0])
			if err != nil {
				return err
			}
			rb, sb, err := src.get(args[1])
			if err != nil {
				return err
			}
			if err := writeOutput(cmd.OutOrStdout(), outPath, func(w io.Writer) error {
				if err := report.CompareFormat(w, format, ra, sa, rb, sb); err != nil {
					return err
				}
				return src.compareStages(w, format, args[0], ra, sa, args[1], rb, sb)
			}); err != nil {
				return err
			}
			if gate == nil {
				return nil
			}
			rows, _, _ := report.Comparison(ra, sa, rb, sb)
			if junit != "" {
				suite := fmt.Sprintf("cnibench compare %s %s (%s)", ra.Name, rb.Name, gate.Text)
				if err := writeOutput(cmd.OutOrStdout(), junit, func(w io.Writer) error { return gate.JUnit(w, suite, rows) }); err != nil {
					return err
				}
			}
			for _, r := range gate.Unused(rows) {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: --fail-on rule %s selects no compared cell\n", r.Text)
			}
			if failed := gate.Gate(rows); len(failed) > 0 {
				return &report.GateError{Gate: *gate, Failed: failed}
			}
			fmt.Fprintln(cmd.ErrOrStderr(), gate.Passed(rows))
			return nil
		},
	}
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if junit != "" && failOn == "" {
			return UsageError{fmt.Errorf("--junit needs --fail-on (the rule decides which cells fail)")}
		}
		if failOn == "" {
			return nil
		}
		g, err := report.ParseGate(failOn)
		if err != nil {
			return UsageError{err}
		}
		gate = &g
		return nil
	}
	cmd.Flags().StringVar(&failOn, "fail-on", "", "exit 1 when a cell of B is significantly worse than A by more than this, e.g. 'slower>5%' or 'slower>5%,tcp_lat:slower>3%'")
	cmd.Flags().StringVar(&junit, "junit", "", "with --fail-on: also write the cells as JUnit XML to this file")
	addDBFlag(cmd, &dbPath)
	cmd.Flags().StringVarP(&format, "format", "f", report.FormatTable, "output format: "+strings.Join(report.CompareFormats, "|"))
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout")
	return cmd
}

func validFormat(f string) bool { return contains(report.Formats, f) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if s == x {
			return true
		}
	}
	return false
}

// writeOutput renders to stdout, or to a file through a temporary file in
// the same directory renamed into place, so a failed render never leaves a
// truncated report behind.
func writeOutput(stdout io.Writer, path string, render func(io.Writer) error) error {
	if path == "" || path == "-" {
		return render(stdout)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := render(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	return nil
}

// rebase makes arm the run's baseline for this rendering (nothing is
// stored), so any two arms of one interleaved run can be tested against
// each other.
func rebase(r *store.Run, arm string) error {
	var names []string
	for _, a := range r.Arms {
		if a.Name == arm {
			r.Baseline = arm
			return nil
		}
		names = append(names, a.Name)
	}
	return fmt.Errorf("--baseline %q: run %s has no such arm (arms: %s)", arm, r.Name, strings.Join(names, ", "))
}
