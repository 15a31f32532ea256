package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/store"
)

// profileFlags are --profile and its rate and event.
type profileFlags struct {
	on    bool
	rate  int
	event string
	arms  []string
}

func addProfileFlags(cmd *cobra.Command, p *profileFlags) {
	f := cmd.Flags()
	f.BoolVar(&p.on, "profile", false, "sample every CPU (perf events, kernel callchains) during each measured window and report CPU by datapath stage; needs root or CAP_PERFMON")
	f.IntVar(&p.rate, "profile-rate", profile.DefaultFrequency, fmt.Sprintf("with --profile: samples per second per CPU (1..%d)", profile.MaxFrequency))
	f.StringSliceVar(&p.arms, "profile-arms", nil, "with --profile: profile only these arms (e.g. to measure the profiler's overhead against the same arm unprofiled)")
	f.StringVar(&p.event, "profile-event", "", "with --profile: cycles or cpu-clock (default: cycles where the host has a PMU, cpu-clock otherwise)")
}

// options are the sampler's options, nil without --profile.
func (p profileFlags) options() (*profile.Options, error) {
	if !p.on {
		if len(p.arms) > 0 {
			return nil, fmt.Errorf("--profile-arms needs --profile")
		}
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
			d, err := store.OpenExisting(db)
			if err != nil {
				return usage(err)
			}
			defer d.Close()
			run, samples, err := d.Load(args[0])
			if err != nil {
				return usage(err)
			}
			es, err := stages.ExplainRun(d, run, samples, args[1], args[2], test)
			if err != nil {
				return usage(err)
			}
			if jsonOut {
				return report.WriteJSON(cmd.OutOrStdout(), map[string]any{"run": run.Name, "a": args[1], "b": args[2], "cells": es})
			}
			return stages.WriteText(cmd.OutOrStdout(), es)
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.Flags().StringVar(&test, "test", "", "only this test")
	return cmd
}
