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

// ReportHelp is `cnibench report --help`'s description.
const ReportHelp = `Render one run (by id, name or "last") in the shape of the source documents:
arms as rows, each test's metric as columns, median ±95% CI and the ratio to the
baseline arm. Several runs are put side by side with their host fingerprints
(kernel, distro, CPU), e.g. the same experiment on different distros.
A run is REF (id, name or "last") in --db, or FILE:REF in another results database.`

// ReportExamples is `cnibench report --help`'s examples.
const ReportExamples = `  cnibench report last
  cnibench report 12 --format html -o report.html
  cnibench report ubuntu20-run opensuse15-run --format markdown
  cnibench report ubuntu.db:last opensuse.db:last     # runs from two hosts' databases
  cnibench report last --format openmetrics -o run.prom     # every cell as a Prometheus gauge
  cnibench report last --format openmetrics -o run.prom --push http://pushgateway:9091`

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

// CompareHelp is `cnibench compare --help`'s description.
const CompareHelp = `For every arm, test and message size measured in both runs, print both medians,
the change from A to B in percent, the Mann–Whitney U p-value over the repeats and
a verdict: "equivalent within ±5%" when the 90% interval of B/A lies within the
margin (--margin), else faster/slower by X% when p < 0.05, else "undecided" with
an estimate of how many more samples per arm would decide it.
A run is REF (id, name or "last") in --db, or FILE:REF in another results database.
REF@ARM takes one arm of a run: 'compare 7@base 7@candidate' compares two arms of
one interleaved run, which a drifting machine affects alike (the better gate).
--relative compares each arm's ratio to its own run's baseline, round by round:
did the answer stay the same on a machine whose speed drifts between runs?`

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

// HistoryHelp is `cnibench history --help`'s description.
const HistoryHelp = `Every complete stored run of one experiment (by the experiment's name stored with each run),
oldest first: each cell's median per run as a sparkline (terminal) or a line chart
(HTML), the change points E-divisive means finds in it (a permutation test at
p ≤ 0.05 with a fixed seed, at least 3 runs on each side), and the runs' host
fingerprints, so a kernel or host change shows next to a shift.`

// HistoryExamples is `cnibench history --help`'s examples.
const HistoryExamples = `  cnibench history default
  cnibench history kube-ovn-default-vs-optimized --format html -o history.html
  cnibench history default --last 30 --format json`

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
