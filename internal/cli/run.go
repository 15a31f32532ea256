package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/store"
)

func newRunCmd() *cobra.Command {
	c := experiment.RunCommand{Ref: "default", Local: experiment.LocalOptions{Kind: store.KindLab, Version: Version}}
	cmd := command("run [FILE|NAME]", "Run an experiment: build each arm's lab, measure, store, report", cobra.MaximumNArgs(1),
		func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				c.Ref = args[0]
			}
			return c.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = experiment.RunHelp()
	f := cmd.Flags()
	addDBFlag(cmd, &c.Local.DBPath)
	addOverrideFlags(f, &c.Flags)
	f.StringVar(&c.Format, "format", "table", "report format printed at the end: table, markdown, json, csv, html, none")
	addMarginFlag(cmd, &c.Margin)
	f.StringVarP(&c.Output, "output", "o", "", "write the report to this file instead of standard output")
	addProfileFlags(cmd, &c.Profile)
	f.StringVar(&c.Flags.Precision, "precision", "", "keep adding interleaved rounds for cells whose median's 95% CI is wider than ±P of the median, e.g. 5%")
	f.StringVar(&c.Flags.Budget, "budget", "", "wall-time limit of a precision-driven run, e.g. 5m (default 10m)")
	f.StringVar(&c.Flags.Wakeup, "wakeup", "", "keep idle CPUs awake while measuring: auto (hold for request/response tests, none for streams), spin, hold or none")
	f.StringVar(&c.Flags.CPUs, "cpus", "", "pin the client and server: auto (the last two CPUs, client first), none or client=N,server=M")
	f.BoolVar(&c.Flags.RetakeDisturbed, "retake-disturbed", false, "measure every step taken while the machine was disturbed once more (both kept; the report uses the retake)")
	return cmd
}

// addOverrideFlags adds the overrides `run` and `tune verify` share.
func addOverrideFlags(f *pflag.FlagSet, o *experiment.RunFlags) {
	f.IntVar(&o.Repeats, "repeats", 0, "override the experiment's repeats")
	f.DurationVar(&o.Duration, "duration", 0, "override the measured interval of each step")
	f.StringVar(&o.Warmup, "warmup", "", "override the warmup of each step, e.g. 500ms")
	f.StringSliceVar(&o.Arms, "arms", nil, "run only these arms")
}

func newCrosscheckCmd() *cobra.Command {
	c := experiment.RunCommand{Ref: "crosscheck", Local: experiment.LocalOptions{Kind: store.KindCrosscheck, Version: Version}}
	cmd := command("crosscheck", "Measure one veth path with the built-in engine and with qperf, sockperf and iperf3, interleaved", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return c.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = experiment.CrosscheckHelp
	f := cmd.Flags()
	addDBFlag(cmd, &c.Local.DBPath)
	f.IntVar(&c.Flags.Repeats, "repeats", 0, "repeats per cell (default 3)")
	f.DurationVar(&c.Flags.Duration, "duration", 0, "measured interval per step (default 2s)")
	f.StringVar(&c.Format, "format", "table", "report format: table, markdown, json, csv, html")
	return cmd
}
