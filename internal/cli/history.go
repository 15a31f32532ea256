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
	cmd.Long = `Every complete stored run of one experiment (by the experiment's name stored with each run),
oldest first: each cell's median per run as a sparkline (terminal) or a line chart
(HTML), the change points E-divisive means finds in it (a permutation test at
p ≤ 0.05 with a fixed seed, at least 3 runs on each side), and the runs' host
fingerprints, so a kernel or host change shows next to a shift.`
	cmd.Example = `  cnibench history default
  cnibench history kube-ovn-default-vs-optimized --format html -o history.html
  cnibench history default --last 30 --format json`
	addDBFlag(cmd, &c.DBPath)
	cmd.Flags().IntVar(&c.Last, "last", 0, "only the newest N runs (0 = all)")
	addOutputFlags(cmd, &c.Format, &c.Output, report.HistoryFormats)
	return cmd
}
