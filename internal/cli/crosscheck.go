package cli

import (
	"time"

	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/spf13/cobra"
)

func newCrosscheckCmd() *cobra.Command {
	var (
		db       string
		repeats  int
		duration time.Duration
		format   string
	)
	cmd := &cobra.Command{
		Use:   "crosscheck",
		Short: "Measure one veth path with the built-in engine and with qperf, sockperf and iperf3, interleaved",
		Long: `Runs the ready experiment "crosscheck": the built-in engine and each reference
tool on the same veth pair, interleaved in one run, and prints every arm as a
ratio to the built-in engine. It is the method behind the engine's accuracy
claims (docs/engine.md). A tool that lacks a test is not asked for it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := experiment.Load("crosscheck")
			if err != nil {
				return err
			}
			o := runOptions{repeats: repeats, duration: duration, format: format}
			if err := o.override(e); err != nil {
				return UsageError{err}
			}
			return runExperiment(cmd, e, experiment.LocalOptions{DBPath: db, Kind: store.KindCrosscheck}, format, "")
		},
	}
	f := cmd.Flags()
	addDBFlag(cmd, &db)
	f.IntVar(&repeats, "repeats", 0, "repeats per cell (default 3)")
	f.DurationVar(&duration, "duration", 0, "measured interval per step (default 2s)")
	f.StringVar(&format, "format", "table", "report format: table, markdown, json, csv, html")
	return cmd
}
