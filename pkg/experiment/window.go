package experiment

import (
	"context"
	"sync"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/result"
)

// measureInWindow runs one measurement with a window open over what the
// engine measures: from the end of the client's warmup for the measured
// duration, or until the client ends if sooner. start starts what watches
// the window (what: "profile", "datapath meter") and stop stops it; stop is
// called once, only after start succeeded, never at the same time as
// start. The string says why the window gave nothing ("" when it did):
// the client ended within its warmup, start failed, or stop failed.
func measureInWindow(ctx context.Context, m Measurer, req MeasureRequest, what string, start, stop func() error) (*result.Result, string, error) {
	var (
		mu       sync.Mutex
		started  bool
		stopped  bool
		finished bool
		why      = "the client ended before its warmup did"
		timers   []*time.Timer
	)
	closeWindow := func() { // mu held
		if started && !stopped {
			stopped = true
			if err := stop(); err != nil {
				why = "stop " + what + ": " + err.Error()
			}
		}
	}
	outer := ctx // an outer window's hook (--profile around a datapath meter) still runs
	hook := func() {
		driver.ClientStarted(outer)
		mu.Lock()
		defer mu.Unlock()
		timers = append(timers, time.AfterFunc(req.Spec.Warmup, func() {
			mu.Lock()
			defer mu.Unlock()
			if finished || started {
				return
			}
			if err := start(); err != nil {
				why = "start " + what + ": " + err.Error()
				return
			}
			started, why = true, ""
			timers = append(timers, time.AfterFunc(req.Spec.Duration, func() {
				mu.Lock()
				defer mu.Unlock()
				closeWindow()
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
	closeWindow()
	return res, why, err
}
