package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/report"
)

// The history commands: `cnibench runs`, `cnibench report`, `cnibench compare`.

func newRunsCmd() *cobra.Command {
	var dbPath string
	var asJSON bool
	noArgs := argsUsage(0, 0, func(args []string) error {
		return fmt.Errorf("runs takes no arguments (got %q); use `cnibench report <run>` to see one", args[0])
	})
	cmd := command("runs", "List the runs stored in the results database", noArgs, func(cmd *cobra.Command, _ []string) error {
		return report.ListRuns(cmd.OutOrStdout(), dbPath, asJSON)
	})
	addDBFlag(cmd, &dbPath)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array instead of a table")
	return cmd
}

func newReportCmd() *cobra.Command {
	var c report.ReportCommand
	someRuns := argsUsage(1, -1, func([]string) error {
		return errors.New("missing run to report on: give a run id, name or \"last\" (see `cnibench runs`)")
	})
	cmd := command("report <run>...", "Render stored runs as a table, markdown, JSON, CSV, HTML or OpenMetrics", someRuns,
		func(cmd *cobra.Command, args []string) error {
			c.Refs = args
			return c.Run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = report.ReportHelp
	cmd.Example = report.ReportExamples
	addDBFlag(cmd, &c.DBPath)
	cmd.Flags().StringVar(&c.Baseline, "baseline", "", "compare every arm with this one instead of the run's baseline (ratios and verdicts)")
	addMarginFlag(cmd, &c.Margin)
	addOutputFlags(cmd, &c.Format, &c.Output, report.Formats)
	cmd.Flags().StringVar(&c.Push, "push", "", "also push every cell to this Prometheus Pushgateway (job cnibench, grouped by experiment and run)")
	return cmd
}

// addMarginFlag adds --margin, the verdicts' equivalence margin.
func addMarginFlag(cmd *cobra.Command, margin *string) {
	cmd.Flags().StringVar(margin, "margin", "5%", "call two arms equivalent when the 90% interval of their ratio lies within ±this")
}

// addOutputFlags adds --format (one of formats, the first the default) and --output.
func addOutputFlags(cmd *cobra.Command, format, output *string, formats []string) {
	cmd.Flags().StringVarP(format, "format", "f", report.FormatTable, "output format: "+strings.Join(formats, "|"))
	cmd.Flags().StringVarP(output, "output", "o", "", "write to this file instead of stdout")
}

func newCompareCmd() *cobra.Command {
	var c report.CompareCommand
	cmd := command("compare <run-a> <run-b>", "Compare two runs cell by cell with a significance test",
		exactArgs(2, "compare needs exactly two runs (got %d): cnibench compare <run-a> <run-b>; list runs with `cnibench runs`"),
		func(cmd *cobra.Command, args []string) error {
			c.A, c.B = args[0], args[1]
			return c.Run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = report.CompareHelp
	cmd.Flags().StringVar(&c.FailOn, "fail-on", "", "exit 1 when a cell of B is significantly worse than A by more than this, e.g. 'slower>5%' or 'slower>5%,tcp_lat:slower>3%'")
	cmd.Flags().StringVar(&c.JUnit, "junit", "", "with --fail-on: also write the cells as JUnit XML to this file")
	cmd.Flags().BoolVar(&c.Relative, "relative", false, "compare each arm's per-round ratio to its run's baseline instead of absolute values")
	addMarginFlag(cmd, &c.Margin)
	addDBFlag(cmd, &c.DBPath)
	addOutputFlags(cmd, &c.Format, &c.Output, report.CompareFormats)
	return cmd
}

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
