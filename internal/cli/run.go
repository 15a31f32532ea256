package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/cnibench/cnibench/pkg/disturb"
	"github.com/cnibench/cnibench/pkg/driver/builtin"
	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/sysinfo"
)

type runOptions struct {
	db       string
	repeats  int
	duration time.Duration
	warmup   string
	format   string
	output   string
	arms     []string
	// precision and budget are strings so that "unset" differs from 0.
	precision string
	budget    string
	profile   profileFlags
	wakeup    string
	cpus      string
	retake    bool
}

func newRunCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [FILE|NAME]",
		Short: "Run an experiment: build each arm's lab, measure, store, report",
		Long: `Run an experiment file, or a ready experiment by name (default: "default").
Ready experiments: ` + strings.Join(experiment.ReadyNames(), ", ") + `.

Each distinct lab topology is built once and kept up for the whole run so the
steps can be interleaved (A B C A B C …); every lab is removed at the end, also
on failure and Ctrl-C. Each sample is stored as it finishes, so an interrupted
run keeps what it measured and is marked incomplete.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := "default"
			if len(args) == 1 {
				ref = args[0]
			}
			prof, err := o.profile.options()
			if err != nil {
				return UsageError{err}
			}
			e, err := experiment.Load(ref)
			if err != nil {
				return UsageError{err}
			}
			if err := o.override(e); err != nil {
				return UsageError{err}
			}
			if prof != nil {
				if prof.Arms, err = o.profile.armSet(e); err != nil {
					return UsageError{err}
				}
			}
			return runExperiment(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), e, o.db, "lab", o.format, o.output, prof)
		},
	}
	f := cmd.Flags()
	addDBFlag(cmd, &o.db)
	f.IntVar(&o.repeats, "repeats", 0, "override the experiment's repeats")
	f.DurationVar(&o.duration, "duration", 0, "override the measured interval of each step")
	f.StringVar(&o.warmup, "warmup", "", "override the warmup of each step, e.g. 500ms")
	f.StringVar(&o.format, "format", "table", "report format printed at the end: table, markdown, json, csv, html, none")
	f.StringVarP(&o.output, "output", "o", "", "write the report to this file instead of standard output")
	f.StringSliceVar(&o.arms, "arms", nil, "run only these arms")
	addProfileFlags(cmd, &o.profile)
	f.StringVar(&o.precision, "precision", "", "keep adding interleaved rounds for cells whose median's 95% CI is wider than ±P of the median, e.g. 5%")
	f.StringVar(&o.budget, "budget", "", "wall-time limit of a precision-driven run, e.g. 5m (default 10m)")
	f.StringVar(&o.wakeup, "wakeup", "", "keep idle CPUs awake while measuring: auto (calibrated at the start), spin, hold or none")
	f.StringVar(&o.cpus, "cpus", "", "pin the client and server: auto, none or client=N,server=M")
	f.BoolVar(&o.retake, "retake-disturbed", false, "measure every step taken while the machine was disturbed once more (both kept; the report uses the retake)")
	return cmd
}

func (o *runOptions) override(e *experiment.Experiment) error {
	ov := experiment.Overrides{Repeats: o.repeats, Duration: o.duration, Arms: o.arms,
		Wakeup: o.wakeup, CPUs: o.cpus, RetakeDisturbed: o.retake}
	if o.warmup != "" {
		w, err := time.ParseDuration(o.warmup)
		if err != nil {
			return fmt.Errorf("--warmup %q: want a duration like 500ms or 0s", o.warmup)
		}
		ov.Warmup = &w
	}
	if o.precision != "" {
		p, err := experiment.ParsePercent(o.precision)
		if err != nil {
			return fmt.Errorf("--precision: %v", err)
		}
		ov.Precision = &p
	}
	if o.budget != "" {
		b, err := time.ParseDuration(o.budget)
		if err != nil {
			return fmt.Errorf("--budget %q: want a duration like 5m", o.budget)
		}
		ov.Budget = &b
	}
	switch o.format {
	case "table", "markdown", "json", "csv", "html", "none":
	default:
		return fmt.Errorf("--format %q: want table, markdown, json, csv, html or none", o.format)
	}
	return e.Override(ov)
}

// runExperiment executes e, stores it, and renders the report.
func runExperiment(ctx context.Context, stdout, stderr io.Writer, e *experiment.Experiment, dbPath, kind, format, output string, prof *profileRequest) error {
	if os.Geteuid() != 0 {
		return errors.New("running an experiment builds network namespaces and needs root: run it with sudo")
	}
	// A missing perf permission is found before anything is built.
	var profiler experiment.Profiler
	var profArms map[string]bool
	if prof != nil {
		profArms = prof.Arms
		sess, err := profile.Open(prof.Options)
		if err != nil {
			return fmt.Errorf("--profile: %w", err)
		}
		defer sess.Close()
		profiler = sess
		fmt.Fprintf(stderr, "profiling every CPU at %d Hz (%s) during each measured window\n", prof.Frequency, sess.Event())
	}
	// A missing tool is found before the run is stored or anything built.
	if err := e.Preflight(); err != nil {
		return err
	}
	// The spinner of --wakeup spin is this binary run as another process.
	exe, err := builtin.Bin()
	if err != nil {
		return err
	}
	db, err := store.Open(dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	hostFP := sysinfo.Host.Fingerprint(Version)
	// What this kernel can build goes with every run (about 0.1 s), so a
	// report across hosts says why an arm is missing on one of them.
	if pr, err := lab.Probe(ctx); err == nil {
		hostFP.Capabilities = pr.Supported()
	}
	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	fmt.Fprintf(stderr, "experiment %s: %d arms, %d steps\n", e.Name, len(e.Arms), len(e.Plan()))
	runID, err := experiment.Execute(ctx, e, experiment.Options{
		Labs:        experiment.Labs{},
		Measurer:    experiment.Drivers{},
		Sink:        experiment.StoreSink{DB: db, Kind: kind, Host: hostFP},
		Progress:    stderr,
		IsTerminal:  tty,
		Profiler:    profiler,
		ProfileArms: profArms,
		Wakeup:      experiment.Controller{Exe: exe},
		Disturb:     disturb.New(sysinfo.Host),
		// The file's retake_disturbed, or --retake-disturbed.
		RetakeDisturbed: e.RetakeDisturbed,
	})
	if runID != 0 {
		fmt.Fprintf(stderr, "stored as run %d in %s\n", runID, db.Path())
	}
	var failed *experiment.StepsFailedError
	if err != nil && !errors.Is(err, experiment.ErrInterrupted) && !errors.As(err, &failed) {
		return err
	}
	if runID != 0 && format != "none" {
		if rerr := renderRun(db, runID, format, output, stdout); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

func renderRun(db *store.DB, runID int64, format, output string, stdout io.Writer) error {
	run, err := db.GetRun(fmt.Sprint(runID))
	if err != nil {
		return err
	}
	samples, err := db.Samples(runID)
	if err != nil {
		return err
	}
	w := stdout
	if output != "" {
		f, err := os.Create(output)
		if err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		defer f.Close()
		w = f
	}
	st, err := runStages(db, run, samples)
	if err != nil {
		return err
	}
	return report.RenderRunsStages(w, format, []report.Input{{Run: run, Samples: samples}}, []*stages.Report{st})
}
