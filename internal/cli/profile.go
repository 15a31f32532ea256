package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/stages"
)

// profileFlags are --profile and its rate and event.
type profileFlags struct {
	on    bool
	rate  int
	event string
}

func addProfileFlags(cmd *cobra.Command, p *profileFlags) {
	f := cmd.Flags()
	f.BoolVar(&p.on, "profile", false, "sample every CPU (perf events, kernel callchains) during each measured window and report CPU by datapath stage; needs root or CAP_PERFMON")
	f.IntVar(&p.rate, "profile-rate", profile.DefaultFrequency, fmt.Sprintf("with --profile: samples per second per CPU (1..%d)", profile.MaxFrequency))
	f.StringVar(&p.event, "profile-event", "", "with --profile: cycles or cpu-clock (default: cycles where the host has a PMU, cpu-clock otherwise)")
}

// options returns nil without --profile.
func (p profileFlags) options() (*profile.Options, error) {
	if !p.on {
		return nil, nil
	}
	if p.rate < 1 {
		return nil, fmt.Errorf("--profile-rate %d: want 1..%d samples per second per CPU", p.rate, profile.MaxFrequency)
	}
	o := profile.Options{Frequency: p.rate, Event: profile.Event(p.event)}
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	return &o, nil
}

func newExplainCmd() *cobra.Command {
	var (
		db      string
		jsonOut bool
		test    string
	)
	cmd := &cobra.Command{
		Use:   "explain RUN ARM_A ARM_B",
		Short: "Where arm B's CPU per transaction (or per GB) differs from arm A's, stage by stage (runs taken with --profile)",
		Long: `Explain compares two arms of a run measured with --profile: for each test and
size both have, the CPU per unit of work (CPU-µs per transaction for latency
and CRR tests, CPU-seconds per GB for streams) by datapath stage, the
difference B - A, and how sure each difference is (a two-sided Mann-Whitney
test over the repeats; one repeat gives no significance). Stages, and how a
stack is classified, are documented in docs/profiling.md.`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := openExistingDB(db)
			if err != nil {
				return err
			}
			defer d.Close()
			run, samples, err := getRun(d, args[0])
			if err != nil {
				return err
			}
			profs, err := d.Profiles(run.ID)
			if err != nil {
				return err
			}
			if len(profs) == 0 {
				return UsageError{fmt.Errorf("run %s was measured without --profile: run it again with --profile", run.Name)}
			}
			cells, err := stages.Cells(samples, profs)
			if err != nil {
				return err
			}
			es, err := stages.Explain(cells, args[1], args[2])
			if err != nil {
				return UsageError{err}
			}
			if test != "" {
				var keep []stages.Explanation
				for _, e := range es {
					if e.Test == test {
						keep = append(keep, e)
					}
				}
				if len(keep) == 0 {
					return UsageError{fmt.Errorf("--test %q: not profiled for both arms", test)}
				}
				es = keep
			}
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"run": run.Name, "a": args[1], "b": args[2], "cells": es})
			}
			return stages.WriteText(cmd.OutOrStdout(), es)
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.Flags().StringVar(&test, "test", "", "only this test")
	return cmd
}
