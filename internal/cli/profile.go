package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/stages"
)

func addProfileFlags(cmd *cobra.Command, p *profile.Flags) {
	f := cmd.Flags()
	f.BoolVar(&p.On, "profile", false, "sample every CPU (perf events, kernel callchains) during each measured window and report CPU by datapath stage; needs root or CAP_PERFMON")
	f.IntVar(&p.Rate, "profile-rate", profile.DefaultFrequency, fmt.Sprintf("with --profile: samples per second per CPU (1..%d)", profile.MaxFrequency))
	f.StringSliceVar(&p.Arms, "profile-arms", nil, "with --profile: profile only these arms (e.g. to measure the profiler's overhead against the same arm unprofiled)")
	f.StringVar(&p.Event, "profile-event", "", "with --profile: cycles or cpu-clock (default: cycles where the host has a PMU, cpu-clock otherwise)")
}

func newExplainCmd() *cobra.Command {
	c := stages.ExplainCommand{}
	cmd := command("explain RUN ARM_A ARM_B", "Where arm B's CPU per transaction (or per GB) differs from arm A's, stage by stage (runs taken with --profile)", cobra.ExactArgs(3),
		func(cmd *cobra.Command, args []string) error {
			c.Run, c.A, c.B = args[0], args[1], args[2]
			return c.Print(cmd.OutOrStdout())
		})
	cmd.Long = stages.ExplainHelp
	addDBFlag(cmd, &c.DBPath)
	cmd.Flags().BoolVar(&c.JSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&c.Test, "test", "", "only this test")
	return cmd
}
