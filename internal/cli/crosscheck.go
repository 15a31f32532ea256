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
	cmd.Long = experiment.CrosscheckHelp
	f := cmd.Flags()
	addDBFlag(cmd, &c.Local.DBPath)
	f.IntVar(&c.Flags.Repeats, "repeats", 0, "repeats per cell (default 3)")
	f.DurationVar(&c.Flags.Duration, "duration", 0, "measured interval per step (default 2s)")
	f.StringVar(&c.Format, "format", "table", "report format: table, markdown, json, csv, html")
	return cmd
}
