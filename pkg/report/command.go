package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/store"
)

// ErrInvalid is matched (errors.Is) by the commands' errors below that the
// user fixes by changing the command line: a format, a baseline arm, a
// gate rule, an experiment without history.
var ErrInvalid = errors.New("invalid report options")

// ReportCommand is `cnibench report` as given.
type ReportCommand struct {
	DBPath   string
	Refs     []string // runs: REF (id, name or "last") in DBPath, or FILE:REF
	Baseline string   // "" = each run's own baseline arm
	Format   string   // one of Formats
	Output   string   // "" or "-" = stdout
	// Margin is the equivalence margin as given ("5%"); "" = the default.
	Margin string
	// Push, when set, is a Pushgateway URL the runs' cells are pushed to
	// (push.go) after the report is written.
	Push string
}

// options checks the margin into the Options the verdicts use.
func options(margin string) (Options, error) {
	if margin == "" {
		return Options{}, nil
	}
	m, err := ParseMargin(margin)
	if err != nil {
		return Options{}, errkind.Wrap(ErrInvalid, err)
	}
	return Options{Margin: m}, nil
}

// Run renders the runs side by side, with their CPU by stage when profiled.
// Unknown runs and databases are the store's errors (store.ErrNotFound,
// store.ErrNoDatabase).
func (c ReportCommand) Run(stdout, stderr io.Writer) error {
	if !ValidFormat(c.Format) {
		return errkind.Errorf(ErrInvalid, "unknown --format %q; use one of %s", c.Format, strings.Join(Formats, ", "))
	}
	if c.Push != "" {
		if _, err := checkPushURL(c.Push); err != nil {
			return err
		}
	}
	opts, err := options(c.Margin)
	if err != nil {
		return err
	}
	src := store.NewSources(c.DBPath)
	defer src.Close()
	var in []Input
	var sts []*stages.Report
	for _, ref := range c.Refs {
		l, err := src.Load(ref)
		if err != nil {
			return err
		}
		if c.Baseline != "" {
			if err := l.Run.Rebase(c.Baseline); err != nil {
				return errkind.Wrap(ErrInvalid, err)
			}
		}
		st, err := stages.ForRun(l.DB, l.Run, l.Samples)
		if err != nil {
			return err
		}
		in = append(in, Input{Run: l.Run, Samples: l.Samples})
		sts = append(sts, st)
	}
	d, err := opts.NewDocument(in, sts)
	if err != nil {
		return err
	}
	if err := WriteFile(stdout, c.Output, func(w io.Writer) error { return d.Write(w, c.Format) }); err != nil {
		return err
	}
	if c.Push == "" {
		return nil
	}
	groups, err := PushRuns(context.Background(), c.Push, d.models)
	for _, g := range groups {
		fmt.Fprintln(stderr, "pushed", g)
	}
	return err
}

// CompareCommand is `cnibench compare` as given.
type CompareCommand struct {
	DBPath string
	A, B   string // REF, FILE:REF, or either @ARM for one arm of a run
	Format string // one of CompareFormats
	Output string
	// FailOn is the regression gate's rules ("" = no gate); JUnit, with
	// FailOn, also gets the gate's cells as JUnit XML.
	FailOn, JUnit string
	// Margin is the verdicts' equivalence margin as given ("5%"); "" =
	// the default. The gate does not read it: it fails on significance
	// and its own thresholds.
	Margin string
	// Relative compares each arm's per-round ratio to its run's baseline
	// instead of absolute values (Options.Relative).
	Relative bool
}

// gate checks the gate flags, first of all Run checks: nil without --fail-on.
func (c CompareCommand) gate() (*Gate, error) {
	if c.JUnit != "" && c.FailOn == "" {
		return nil, errkind.Errorf(ErrInvalid, "--junit needs --fail-on (the rule decides which cells fail)")
	}
	if c.FailOn == "" {
		return nil, nil
	}
	if c.Relative {
		// The gate judges the metrics' own values; a ratio's gate would
		// need thresholds of its own.
		return nil, errkind.Errorf(ErrInvalid, "--fail-on judges absolute values and cannot be combined with --relative; gate two arms of one run instead (compare RUN@A RUN@B --fail-on …)")
	}
	g, err := ParseGate(c.FailOn)
	if err != nil {
		return nil, errkind.Wrap(ErrInvalid, err)
	}
	return &g, nil
}

// Run compares B with A cell by cell and, with a gate, judges B (a
// *GateError when a cell fails); the gate's notes go to log.
func (c CompareCommand) Run(stdout, log io.Writer) error {
	gate, err := c.gate()
	if err != nil {
		return err
	}
	if !ValidCompareFormat(c.Format) {
		return errkind.Errorf(ErrInvalid, "unknown --format %q for compare; use one of %s", c.Format, strings.Join(CompareFormats, ", "))
	}
	opts, err := options(c.Margin)
	if err != nil {
		return err
	}
	opts.Relative = c.Relative
	src := store.NewSources(c.DBPath)
	defer src.Close()
	a, err := src.Load(c.A)
	if err != nil {
		return err
	}
	b, err := src.Load(c.B)
	if err != nil {
		return err
	}
	store.PairArms(&a, &b)
	if gate != nil {
		gate.AddMetrics(a.Run)
		gate.AddMetrics(b.Run)
	}
	if err := WriteFile(stdout, c.Output, func(w io.Writer) error { return opts.CompareLoaded(w, c.Format, a, b) }); err != nil || gate == nil {
		return err
	}
	return gate.Apply(stdout, log, c.JUnit, a, b)
}

// HistoryCommand is `cnibench history` as given.
type HistoryCommand struct {
	DBPath     string
	Experiment string
	Format     string // one of HistoryFormats
	Output     string
	Last       int // only the newest N runs; 0 = all
}

// Run prints every complete stored run of the experiment as series with
// their change points; how many incomplete runs were left out goes to log.
func (c HistoryCommand) Run(stdout, log io.Writer) error {
	if !slices.Contains(HistoryFormats, c.Format) {
		return errkind.Errorf(ErrInvalid, "unknown --format %q for history; use one of %s", c.Format, strings.Join(HistoryFormats, ", "))
	}
	if c.Last < 0 {
		return errkind.Errorf(ErrInvalid, "--last %d: give a positive number of runs, or 0 for all", c.Last)
	}
	db, err := store.OpenExisting(c.DBPath)
	if err != nil {
		return err
	}
	defer db.Close()
	h, incomplete, err := LoadHistory(db, c.Experiment, c.Last)
	if errors.Is(err, ErrNoHistory) {
		return errkind.Wrap(ErrInvalid, err)
	}
	if err != nil {
		return err
	}
	if incomplete > 0 {
		fmt.Fprintf(log, "history: %d incomplete run(s) of %s left out\n", incomplete, c.Experiment)
	}
	return WriteFile(stdout, c.Output, func(w io.Writer) error { return WriteHistory(w, c.Format, h) })
}
