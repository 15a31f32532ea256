package profile

import (
	"errors"

	"github.com/cnibench/cnibench/pkg/errkind"
)

// ErrInvalid is matched (errors.Is) by Flags.Options' errors: the flags,
// not the host, are wrong.
var ErrInvalid = errors.New("invalid profile flags")

// Flags are --profile, its rate and event, and the arms to profile, as given.
type Flags struct {
	On    bool
	Rate  int
	Event string
	Arms  []string
}

// Options checks the flags and returns the sampler's options, nil without
// --profile.
func (f Flags) Options() (*Options, error) {
	if !f.On {
		if len(f.Arms) > 0 {
			return nil, errkind.Errorf(ErrInvalid, "--profile-arms needs --profile")
		}
		return nil, nil
	}
	if f.Rate < 1 {
		return nil, errkind.Errorf(ErrInvalid, "--profile-rate %d: want 1..%d samples per second per CPU", f.Rate, MaxFrequency)
	}
	o := Options{Frequency: f.Rate, Event: Event(f.Event)}
	if err := o.Validate(); err != nil {
		return nil, errkind.Errorf(ErrInvalid, "--profile: %w", err)
	}
	return &o, nil
}
