package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/store"
)

// `cnibench history <experiment>`: every stored complete run of one
// experiment, each cell as a series with its change points.
func newHistoryCmd() *cobra.Command {
	var dbPath, format, outPath string
	var last int
	cmd := &cobra.Command{
		Use:   "history <experiment>",
		Short: "Show each cell of an experiment across its stored runs, with change points",
		Long: `Every complete stored run of one experiment (runs named <experiment>-<start time>),
oldest first: each cell's median per run as a sparkline (terminal) or a line chart
(HTML), the change points E-divisive means finds in it (a permutation test at
p ≤ 0.05 with a fixed seed, at least 3 runs on each side), and the runs' host
fingerprints, so a kernel or host change shows next to a shift.`,
		Example: `  cnibench history default
  cnibench history kube-ovn-default-vs-optimized --format html -o history.html
  cnibench history default --last 30 --format json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return UsageError{fmt.Errorf("history needs one experiment name (got %d arguments), e.g. cnibench history default", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(report.HistoryFormats, format) {
				return UsageError{fmt.Errorf("unknown --format %q for history; use one of %s", format, strings.Join(report.HistoryFormats, ", "))}
			}
			if last < 0 {
				return UsageError{fmt.Errorf("--last %d: give a positive number of runs, or 0 for all", last)}
			}
			db, err := store.OpenExisting(dbPath)
			if err != nil {
				return usage(err)
			}
			defer db.Close()
			h, incomplete, err := report.LoadHistory(db, args[0], last)
			if errors.Is(err, report.ErrNoHistory) {
				return UsageError{err}
			}
			if err != nil {
				return err
			}
			if incomplete > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "history: %d incomplete run(s) of %s left out\n", incomplete, args[0])
			}
			return report.WriteFile(cmd.OutOrStdout(), outPath, func(w io.Writer) error { return report.WriteHistory(w, format, h) })
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().IntVar(&last, "last", 0, "only the newest N runs (0 = all)")
	cmd.Flags().StringVarP(&format, "format", "f", report.FormatTable, "output format: "+strings.Join(report.HistoryFormats, "|"))
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout")
	return cmd
}
