package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/store"
)

// The history commands: `cnibench runs`, `cnibench report`, `cnibench compare`.

// addDBFlag adds --db to a command that reads or writes the results
// database. Its default honours $CNIBENCH_DB and $XDG_DATA_HOME.
func addDBFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "db", store.DefaultPath(), "results database (SQLite file; env CNIBENCH_DB)")
}

// usage marks the errors a user fixes by changing the command line (an
// unknown run, a missing database) as usage errors; others pass unchanged.
func usage(err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNoDatabase) || errors.Is(err, store.ErrNoSuchArm) || errors.Is(err, stages.ErrNotProfiled) {
		return UsageError{err}
	}
	return err
}

func argsAtLeast(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return UsageError{fmt.Errorf("missing %s: give a run id, name or \"last\" (see `cnibench runs`)", what)}
		}
		return nil
	}
}

func newRunsCmd() *cobra.Command {
	var dbPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the runs stored in the results database",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return UsageError{fmt.Errorf("runs takes no arguments (got %q); use `cnibench report <run>` to see one", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return report.ListRuns(cmd.OutOrStdout(), dbPath, asJSON)
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array instead of a table")
	return cmd
}

func newReportCmd() *cobra.Command {
	var dbPath, format, outPath, baseline string
	cmd := &cobra.Command{
		Use:   "report <run>...",
		Short: "Render stored runs as a table, markdown, JSON, CSV or HTML",
		Long: `Render one run (by id, name or "last") in the shape of the source documents:
arms as rows, each test's metric as columns, median ±95% CI and the ratio to the
baseline arm. Several runs are put side by side with their host fingerprints
(kernel, distro, CPU), e.g. the same experiment on different distros.
A run is REF (id, name or "last") in --db, or FILE:REF in another results database.`,
		Example: `  cnibench report last
  cnibench report 12 --format html -o report.html
  cnibench report ubuntu20-run opensuse15-run --format markdown
  cnibench report ubuntu.db:last opensuse.db:last     # runs from two hosts' databases`,
		Args: argsAtLeast(1, "run to report on"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !report.ValidFormat(format) {
				return UsageError{fmt.Errorf("unknown --format %q; use one of %s", format, strings.Join(report.Formats, ", "))}
			}
			src := store.NewSources(dbPath)
			defer src.Close()
			var in []report.Input
			var sts []*stages.Report
			for _, ref := range args {
				l, err := src.Load(ref)
				if err != nil {
					return usage(err)
				}
				if baseline != "" {
					if err := l.Run.Rebase(baseline); err != nil {
						return UsageError{err}
					}
				}
				st, err := stages.ForRun(l.DB, l.Run, l.Samples)
				if err != nil {
					return err
				}
				in = append(in, report.Input{Run: l.Run, Samples: l.Samples})
				sts = append(sts, st)
			}
			return report.WriteFile(cmd.OutOrStdout(), outPath, func(w io.Writer) error {
				return report.RenderRunsStages(w, format, in, sts)
			})
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().StringVar(&baseline, "baseline", "", "compare every arm with this one instead of the run's baseline (ratios and verdicts)")
	cmd.Flags().StringVarP(&format, "format", "f", report.FormatTable, "output format: "+strings.Join(report.Formats, "|"))
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout")
	return cmd
}

func newCompareCmd() *cobra.Command {
	var dbPath, outPath, format string
	var gate *report.Gate
	var failOn, junit string
	cmd := &cobra.Command{
		Use:   "compare <run-a> <run-b>",
		Short: "Compare two runs cell by cell with a significance test",
		Long: `For every arm, test and message size measured in both runs, print both medians,
the change from A to B in percent, the Mann–Whitney U p-value over the repeats and
a verdict: faster/slower by X% when p < 0.05, "no significant difference" otherwise.
A run is REF (id, name or "last") in --db, or FILE:REF in another results database.
REF@ARM takes one arm of a run: 'compare 7@base 7@candidate' compares two arms of
one interleaved run, which a drifting machine affects alike (the better gate).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return UsageError{fmt.Errorf("compare needs exactly two runs (got %d): cnibench compare <run-a> <run-b>; list runs with `cnibench runs`", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !report.ValidCompareFormat(format) {
				return UsageError{fmt.Errorf("unknown --format %q for compare; use one of %s", format, strings.Join(report.CompareFormats, ", "))}
			}
			src := store.NewSources(dbPath)
			defer src.Close()
			a, err := src.Load(args[0])
			if err != nil {
				return usage(err)
			}
			b, err := src.Load(args[1])
			if err != nil {
				return usage(err)
			}
			store.PairArms(&a, &b)
			if gate != nil {
				gate.AddMetrics(a.Run)
				gate.AddMetrics(b.Run)
			}
			if err := report.WriteFile(cmd.OutOrStdout(), outPath, func(w io.Writer) error {
				return report.CompareLoaded(w, format, a, b)
			}); err != nil || gate == nil {
				return err
			}
			return gate.Apply(cmd.OutOrStdout(), cmd.ErrOrStderr(), junit, a, b)
		},
	}
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if junit != "" && failOn == "" {
			return UsageError{fmt.Errorf("--junit needs --fail-on (the rule decides which cells fail)")}
		}
		if failOn == "" {
			return nil
		}
		g, err := report.ParseGate(failOn)
		if err != nil {
			return UsageError{err}
		}
		gate = &g
		return nil
	}
	cmd.Flags().StringVar(&failOn, "fail-on", "", "exit 1 when a cell of B is significantly worse than A by more than this, e.g. 'slower>5%' or 'slower>5%,tcp_lat:slower>3%'")
	cmd.Flags().StringVar(&junit, "junit", "", "with --fail-on: also write the cells as JUnit XML to this file")
	addDBFlag(cmd, &dbPath)
	cmd.Flags().StringVarP(&format, "format", "f", report.FormatTable, "output format: "+strings.Join(report.CompareFormats, "|"))
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of stdout")
	return cmd
}
