package cli

import (
	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/report"
)

// `cnibench history <experiment>`: every stored complete run of one
// experiment, each cell as a series with its change points.
func newHistoryCmd() *cobra.Command {
	var c report.HistoryCommand
	cmd := command("history <experiment>", "Show each cell of an experiment across its stored runs, with change points",
		exactArgs(1, "history needs one experiment name (got %d arguments), e.g. cnibench history default"),
		func(cmd *cobra.Command, args []string) error {
			c.Experiment = args[0]
			return c.Run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = report.HistoryHelp
	cmd.Example = report.HistoryExamples
	addDBFlag(cmd, &c.DBPath)
	cmd.Flags().IntVar(&c.Last, "last", 0, "only the newest N runs (0 = all)")
	addOutputFlags(cmd, &c.Format, &c.Output, report.HistoryFormats)
	return cmd
}
