package experiment

import (
	"context"
	"sync"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/result"
)

// Profiler samples the CPUs during a window (pkg/profile's Session).
type Profiler interface {
	Start() error
	Stop() (*profile.Profile, error)
}

// measureProfiled runs one measurement with p sampling from the end of the
// client's warmup for the measured duration (or until the client ends, if
// sooner). The profile is nil, with the reason, when the window never
// opened.
func measureProfiled(ctx context.Context, m Measurer, req MeasureRequest, p Profiler) (*result.Result, *profile.Profile, string, error) {
	var (
		mu       sync.Mutex
		started  bool
		stopped  bool
		prof     *profile.Profile
		why      = "the client ended before its warmup did"
		timers   []*time.Timer
		finished bool
	)
	stop := func() {
		// mu held
		if started && !stopped {
			stopped = true
			pr, err := p.Stop()
			if err != nil {
				why = "stop profile: " + err.Error()
				return
			}
			prof = pr
		}
	}
	hook := func() {
		mu.Lock()
		defer mu.Unlock()
		timers = append(timers, time.AfterFunc(req.Spec.Warmup, func() {
			mu.Lock()
			defer mu.Unlock()
			if finished || started {
				return
			}
			if err := p.Start(); err != nil {
				why = "start profile: " + err.Error()
				return
			}
			started = true
			timers = append(timers, time.AfterFunc(req.Spec.Duration, func() {
				mu.Lock()
				defer mu.Unlock()
				stop()
			}))
		}))
	}
	res, err := m.Measure(driver.WithClientStarted(ctx, hook), req)
	mu.Lock()
	defer mu.Unlock()
	finished = true
	for _, t := range timers {
		t.Stop()
	}
	stop()
	if prof == nil {
		return res, nil, why, err
	}
	return res, prof, "", err
}
