package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/atomicfile"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/termtable"
)

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

// WriteRunsJSON lists stored runs as a JSON array; counts are the samples
// per run id.
func WriteRunsJSON(w io.Writer, runs []store.Run, counts map[int64]int) error {
	list := make([]RunListing, 0, len(runs))
	for _, r := range runs {
		l := RunListing{ID: r.ID, Name: r.Name, Kind: r.Kind, Started: r.Started.UTC(), Complete: r.Complete,
			Status: r.Status, Baseline: r.Baseline, Arms: armNames(r), Samples: counts[r.ID], Host: r.Host, Labels: r.Labels}
		if !r.Finished.IsZero() {
			f := r.Finished.UTC()
			l.Finished = &f
		}
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		list = append(list, l)
	}
	return WriteJSON(w, list)
}

// WriteRunsTable lists stored runs as a terminal table, at most
// TextWidth columns wide: a run with many arms lists them over several
// lines.
func WriteRunsTable(w io.Writer, runs []store.Run, counts map[int64]int) error {
	t := termtable.Table{Labels: 2, Right: []bool{true, false, false, false, false, false, true}}
	for _, h := range []string{"ID", "NAME", "KIND", "STARTED (UTC)", "STATE", "ARMS", "SAMPLES", "HOST", "KERNEL"} {
		t.Header = append(t.Header, termtable.Words(h))
	}
	for _, r := range runs {
		state := "complete"
		if !r.Complete {
			state = "incomplete"
			if r.Finished.IsZero() {
				state = "running or killed"
			}
		}
		// The arms stay comma-separated ("host,vxlan") and break only
		// after a comma.
		var arms termtable.Cell
		for i, a := range armNames(r) {
			if i > 0 {
				arms[i-1] += ","
				a = termtable.Joiner + a
			}
			arms = append(arms, a)
		}
		// A run's name stays whole: it is what `report` and `compare` take.
		t.Rows = append(t.Rows, []termtable.Cell{{fmt.Sprint(r.ID)}, {r.Name}, {r.Kind},
			termtable.Words(r.Started.UTC().Format("2006-01-02 15:04")), termtable.Words(state), arms, {fmt.Sprint(counts[r.ID])},
			termtable.SoftWords(Dash(r.Host.Hostname)), termtable.SoftWords(Dash(r.Host.Kernel))})
	}
	_, err := io.WriteString(w, termtable.Render(t, TextWidth, termtable.Plain))
	return err
}

func armNames(r store.Run) []string {
	names := []string{}
	for _, a := range r.Arms {
		names = append(names, a.Name)
	}
	return names
}

// Dash shows an unknown value as "-".
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteJSON writes v as indented JSON, the layout of every JSON document
// cnibench prints.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ValidFormat reports whether format is one of Formats.
func ValidFormat(format string) bool { return contains(Formats, format) }

// ValidCompareFormat reports whether format is one of CompareFormats.
func ValidCompareFormat(format string) bool { return contains(CompareFormats, format) }

// WriteFile renders to stdout when path is "" or "-", or else to the file
// atomically (pkg/atomicfile), so a failed render never leaves a truncated
// report behind.
func WriteFile(stdout io.Writer, path string, render func(io.Writer) error) error {
	if path == "" || path == "-" {
		return render(stdout)
	}
	return atomicfile.Write(path, 0o644, render)
}

// RenderStored is Options{}.RenderStored.
func RenderStored(w io.Writer, format string, db *store.DB, ref string) error {
	return Options{}.RenderStored(w, format, db, ref)
}

// RenderStored renders one stored run (with its CPU by stage when it was
// profiled), as `cnibench report <run>` does.
func (o Options) RenderStored(w io.Writer, format string, db *store.DB, ref string) error {
	run, samples, err := db.Load(ref)
	if err != nil {
		return err
	}
	st, err := stages.ForRun(db, run, samples)
	if err != nil {
		return err
	}
	return o.RenderRuns(w, format, []Input{{Run: run, Samples: samples}}, []*stages.Report{st})
}

// ErrNoHistory is wrapped when a database holds no complete run of the
// experiment asked about.
var ErrNoHistory = errors.New("no complete runs")

// LoadHistory reads every complete stored run of an experiment, oldest
// first, and the history of the newest last of them (0: all; change points
// are looked for in the window shown). incomplete counts the runs of the
// experiment left out.
func LoadHistory(db *store.DB, experiment string, last int) (h *History, incomplete int, err error) {
	runs, err := db.Runs()
	if err != nil {
		return nil, 0, err
	}
	var in []Input
	names := map[string]bool{}
	for i := range runs {
		r := &runs[i]
		exp := ExperimentOf(r)
		if exp != "" {
			names[exp] = true
		}
		if exp != experiment {
			continue
		}
		if !r.Complete {
			incomplete++
			continue
		}
		in = append(in, Input{Run: r})
	}
	// Reading a run's samples is mostly decoding their JSON: spread it
	// over the CPUs.
	errs := make([]error, len(in))
	parallel(len(in), func(i int) { in[i].Samples, errs[i] = db.Samples(in[i].Run.ID) })
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	if len(in) == 0 {
		var known []string
		for n := range names {
			known = append(known, n)
		}
		sort.Strings(known)
		if len(known) == 0 {
			known = []string{"none"}
		}
		return nil, incomplete, fmt.Errorf("%w of experiment %q in %s (experiments stored: %s)", ErrNoHistory, experiment, db.Path(), strings.Join(known, ", "))
	}
	h = BuildHistory(experiment, in, stats.EDivisiveOptions{})
	if last > 0 && len(h.Runs) > last {
		keep := map[int64]bool{}
		for _, r := range h.Runs[len(h.Runs)-last:] {
			keep[r.ID] = true
		}
		var sub []Input
		for _, x := range in {
			if keep[x.Run.ID] {
				sub = append(sub, x)
			}
		}
		h = BuildHistory(experiment, sub, stats.EDivisiveOptions{})
	}
	return h, incomplete, nil
}

// CompareLoaded writes compare's page of run b against run a with, in the
// text formats, each arm's CPU by datapath stage when both runs were
// profiled (JSON stays one document; `explain --json` has those figures).
func (o Options) CompareLoaded(w io.Writer, format string, a, b store.Loaded) error {
	d, err := o.newComparison(format, a.Run, a.Samples, b.Run, b.Samples)
	if err != nil {
		return err
	}
	if format == FormatTable || format == FormatMarkdown {
		sta, err := stages.ForRun(a.DB, a.Run, a.Samples)
		if err != nil {
			return err
		}
		stb, err := stages.ForRun(b.DB, b.Run, b.Samples)
		if err != nil {
			return err
		}
		d.StagesCompared = stageComparison(a.Run.Name, sta, b.Run.Name, stb)
	}
	return d.Write(w, format)
}

// Apply judges run b against run a by the gate's rules: the cells as JUnit
// XML to junitPath (when not ""; "-" is out), a warning to log for every rule that
// selects no cell, and a *GateError when a cell fails — or else a line to
// log saying the gate passed.
func (g *Gate) Apply(out, log io.Writer, junitPath string, a, b store.Loaded) error {
	rows, _, _ := Comparison(a.Run, a.Samples, b.Run, b.Samples)
	if junitPath != "" {
		suite := fmt.Sprintf("cnibench compare %s %s (%s)", a.Run.Name, b.Run.Name, g.Text)
		if err := WriteFile(out, junitPath, func(w io.Writer) error { return g.JUnit(w, suite, rows) }); err != nil {
			return err
		}
	}
	for _, r := range g.Unused(rows) {
		fmt.Fprintf(log, "warning: --fail-on rule %s selects no compared cell\n", r.Text)
	}
	if failed := g.Gate(rows); len(failed) > 0 {
		return &GateError{Gate: *g, Failed: failed}
	}
	fmt.Fprintln(log, g.Passed(rows))
	return nil
}

// ListRuns prints the runs stored in the database at path (`cnibench
// runs`), as a table or a JSON array. A missing database is no error, and
// is not created: there are no runs yet.
func ListRuns(w io.Writer, path string, asJSON bool) error {
	none := func() error {
		if asJSON {
			_, err := io.WriteString(w, "[]\n")
			return err
		}
		_, err := fmt.Fprintf(w, "no runs stored in %s yet; run an experiment with `cnibench run experiments/default.yaml`\n", path)
		return err
	}
	db, err := store.OpenExisting(path)
	if errors.Is(err, store.ErrNoDatabase) {
		return none()
	} else if err != nil {
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
	switch {
	case asJSON:
		return WriteRunsJSON(w, runs, counts)
	case len(runs) == 0:
		return none()
	}
	return WriteRunsTable(w, runs, counts)
}
