package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/units"
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

// armSet is --profile-arms as a set, checked against the experiment's arms
// (nil: every arm).
func (p profileFlags) armSet(e *experiment.Experiment) (map[string]bool, error) {
	if len(p.arms) == 0 {
		return nil, nil
	}
	have := map[string]bool{}
	var names []string
	for _, a := range e.Arms {
		have[a.Name] = true
		names = append(names, a.Name)
	}
	set := map[string]bool{}
	for _, a := range p.arms {
		if !have[a] {
			return nil, fmt.Errorf("--profile-arms: no arm %q (arms: %s)", a, strings.Join(names, ", "))
		}
		set[a] = true
	}
	return set, nil
}

// profileRequest is what runExperiment needs to profile: the sampler's
// options and the arms to profile (nil: all).
type profileRequest struct {
	profile.Options
	Arms map[string]bool
}

// options returns nil without --profile.
func (p profileFlags) options() (*profileRequest, error) {
	if !p.on {
		return nil, nil
	}
	if len(p.arms) > 0 && !p.on {
		return nil, fmt.Errorf("--profile-arms needs --profile")
	}
	if p.rate < 1 {
		return nil, fmt.Errorf("--profile-rate %d: want 1..%d samples per second per CPU", p.rate, profile.MaxFrequency)
	}
	o := profile.Options{Frequency: p.rate, Event: profile.Event(p.event)}
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	return &profileRequest{Options: o}, nil
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

// runStages is a run's CPU by stage, nil for a run taken without --profile.
func runStages(db *store.DB, run *store.Run, samples []store.Sample) (*stages.Report, error) {
	profs, err := db.Profiles(run.ID)
	if err != nil || len(profs) == 0 {
		return nil, err
	}
	cells, err := stages.Cells(samples, profs)
	if err != nil {
		return nil, err
	}
	return &stages.Report{Cells: cells}, nil
}

func (s *runSource) stages(ref string, run *store.Run, samples []store.Sample) (*stages.Report, error) {
	db, _, err := s.resolve(ref)
	if err != nil {
		return nil, err
	}
	return runStages(db, run, samples)
}

// runProfiled runs one client test with the CPUs sampled from the end of
// its warmup for its duration (the client starts its warmup as it is
// called), then prints the window's CPU by stage to w (standard error, so
// --json output stays one document).
func runProfiled(ctx context.Context, w io.Writer, sess *profile.Session, f *clientFlags, p *clientPlan, test string, size int) (*result.Result, *result.WindowProfile, error) {
	var (
		mu      sync.Mutex
		started bool
		prof    *profile.Profile
		perr    error
	)
	stop := func() {
		if started && prof == nil && perr == nil {
			prof, perr = sess.Stop()
		}
	}
	t1 := time.AfterFunc(f.warmup, func() {
		mu.Lock()
		defer mu.Unlock()
		if prof == nil && perr == nil {
			if perr = sess.Start(); perr == nil {
				started = true
			}
		}
	})
	t2 := time.AfterFunc(f.warmup+f.duration, func() {
		mu.Lock()
		defer mu.Unlock()
		stop()
	})
	r, err := runOne(ctx, f, p, test, size)
	t1.Stop()
	t2.Stop()
	mu.Lock()
	defer mu.Unlock()
	stop()
	if err != nil {
		return nil, nil, err
	}
	wp := &result.WindowProfile{Test: test, MsgSizeBytes: size}
	if prof == nil {
		reason := "the test ended before its warmup did"
		if perr != nil {
			reason = perr.Error()
		}
		fmt.Fprintf(w, "%s %s: no profile: %s\n", test, units.FormatSize(size), reason)
		wp.Missing = reason
		return r, wp, nil
	}
	// Bounded like one repeat of a stored cell (1 MiB over 8 repeats), so
	// a Kubernetes pod's log stays small; only stack depth is lost.
	profile.Bound(prof.Stacks, profile.MaxCellBytes/8)
	var folded strings.Builder
	if err := profile.WriteFolded(&folded, prof.Stacks); err != nil {
		return nil, nil, err
	}
	if f.profileDir != "" {
		path := filepath.Join(f.profileDir, fmt.Sprintf("%s-%s.folded", test, units.FormatSize(size)))
		if err := os.WriteFile(path, []byte(folded.String()), 0o644); err != nil {
			return nil, nil, fmt.Errorf("--profile-dir: %w", err)
		}
	}
	wp.Event, wp.FrequencyHz, wp.CPUs, wp.WindowNs = string(prof.Event), prof.Frequency, prof.CPUs, prof.WindowNs
	wp.Samples, wp.Lost, wp.PeriodSum, wp.Folded = prof.Samples, prof.Lost, prof.PeriodSum, folded.String()
	sp := &store.Profile{Seq: 0, Event: string(prof.Event), Frequency: prof.Frequency, CPUs: prof.CPUs, WindowNs: prof.WindowNs,
		Samples: prof.Samples, Lost: prof.Lost, PeriodSum: prof.PeriodSum, Folded: folded.String()}
	cells, err := stages.Cells([]store.Sample{{Arm: "client", Test: test, MsgSize: size, Result: r}}, map[int]*store.Profile{0: sp})
	if err != nil {
		return nil, nil, err
	}
	(&stages.Report{Cells: cells}).WriteText(w)
	return r, wp, nil
}

// compareStages prints, under compare's table, each arm's CPU by stage in
// run b against run a when both runs were taken with --profile (text and
// markdown; JSON stays one document, and `explain --json` has the figures).
func (s *runSource) compareStages(w io.Writer, format, refA string, ra *store.Run, sa []store.Sample, refB string, rb *store.Run, sb []store.Sample) error {
	if format != "table" && format != "markdown" {
		return nil
	}
	sta, err := s.stages(refA, ra, sa)
	if err != nil || sta == nil {
		return err
	}
	stb, err := s.stages(refB, rb, sb)
	if err != nil || stb == nil {
		return err
	}
	// Short labels keep the table narrow: A and B are named once above it.
	es := stages.CompareRuns(sta.Cells, stb.Cells, "A", "B")
	if len(es) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nCPU by datapath stage, each arm of B against itself in A (both runs profiled; A = %s, B = %s):\n", ra.Name, rb.Name)
	if format == "markdown" {
		fmt.Fprintln(w, "```")
		defer fmt.Fprintln(w, "```")
	}
	return stages.WriteText(w, es)
}
