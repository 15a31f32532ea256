package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/profile"
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
