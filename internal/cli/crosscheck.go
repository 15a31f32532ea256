package cli

import (
	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/store"
)

func newCrosscheckCmd() *cobra.Command {
	c := experiment.RunCommand{Ref: "crosscheck", Local: experiment.LocalOptions{Kind: store.KindCrosscheck, Version: Version}}
	cmd := command("crosscheck", "Measure one veth path with the built-in engine and with qperf, sockperf and iperf3, interleaved", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return c.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = `Runs the ready experiment "crosscheck": the built-in engine and each reference
tool on the same veth pair, interleaved in one run, and prints every arm as a
ratio to the built-in engine. It is the method behind the engine's accuracy
claims (docs/engine.md). A tool that lacks a test is not asked for it.`
	f := cmd.Flags()
	addDBFlag(cmd, &c.Local.DBPath)
	f.IntVar(&c.Flags.Repeats, "repeats", 0, "repeats per cell (default 3)")
	f.DurationVar(&c.Flags.Duration, "duration", 0, "measured interval per step (default 2s)")
	f.StringVar(&c.Format, "format", "table", "report format: table, markdown, json, csv, html")
	return cmd
}
