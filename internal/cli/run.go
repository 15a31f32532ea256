package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/store"
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
			lo := experiment.LocalOptions{DBPath: o.db, Kind: store.KindLab}
			if prof != nil {
				lo.Profile = prof
				if lo.ProfileArms, err = e.ArmSet("--profile-arms", o.profile.arms); err != nil {
					return UsageError{err}
				}
			}
			return runExperiment(cmd, e, lo, o.format, o.output)
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
	if err := ov.SetText(o.warmup, o.precision, o.budget); err != nil {
		return err
	}
	if o.format != "none" && !report.ValidFormat(o.format) {
		return fmt.Errorf("--format %q: want table, markdown, json, csv, html or none", o.format)
	}
	return e.Override(ov)
}

// runExperiment runs e on this host, stores it, and renders the report
// (also of an interrupted run, or one with failed steps).
func runExperiment(cmd *cobra.Command, e *experiment.Experiment, lo experiment.LocalOptions, format, output string) error {
	lo.Version, lo.Progress = Version, cmd.ErrOrStderr()
	runID, err := experiment.RunLocal(cmd.Context(), e, lo)
	var failed *experiment.StepsFailedError
	if err != nil && !errors.Is(err, experiment.ErrInterrupted) && !errors.As(err, &failed) {
		return err
	}
	if runID != 0 && format != "none" {
		rerr := report.WriteFile(cmd.OutOrStdout(), output, func(w io.Writer) error {
			db, err := store.Open(lo.DBPath)
			if err != nil {
				return err
			}
			defer db.Close()
			return report.RenderStored(w, format, db, fmt.Sprint(runID))
		})
		if rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
