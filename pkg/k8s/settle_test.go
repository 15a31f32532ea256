package k8s

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/sysinfo"
)

// stats returns a reader that yields one /proc/stat snapshot per call,
// each window adding busy and idle ticks as scripted (the last repeats).
func stats(windows ...[2]uint64) func() (*sysinfo.Stat, error) {
	var cur sysinfo.CPUTimes
	i := -1
	return func() (*sysinfo.Stat, error) {
		if i >= 0 {
			w := windows[min(i, len(windows)-1)]
			cur.User += w[0]
			cur.Idle += w[1]
		}
		i++
		return &sysinfo.Stat{Total: cur}, nil
	}
}

func TestWaitIdle(t *testing.T) {
	// 10 %, 40 % idle, then 80 %: returns at the third window with 80.
	_, idle, err := WaitIdle(context.Background(), stats([2]uint64{90, 10}, [2]uint64{60, 40}, [2]uint64{20, 80}), 70, time.Millisecond, time.Minute)
	if err != nil || idle != 80 {
		t.Fatalf("WaitIdle = %.0f, %v; want 80, nil", idle, err)
	}
	// Never idle enough: ErrNotIdle with the last share.
	_, idle, err = WaitIdle(context.Background(), stats([2]uint64{50, 50}), 70, time.Millisecond, 5*time.Millisecond)
	if !errors.Is(err, ErrNotIdle) || idle != 50 || !strings.Contains(err.Error(), "50 % idle") {
		t.Fatalf("WaitIdle on a busy node = %.0f, %v; want 50 and ErrNotIdle", idle, err)
	}
	// No ticks in any window: not a share of 0 % but "no CPU time".
	if _, _, err := WaitIdle(context.Background(), stats([2]uint64{0, 0}), 70, time.Millisecond, 5*time.Millisecond); !errors.Is(err, ErrNotIdle) || !strings.Contains(err.Error(), "no CPU time") {
		t.Fatalf("WaitIdle without ticks: %v", err)
	}
	// A cancelled context ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := WaitIdle(ctx, stats([2]uint64{50, 50}), 70, time.Millisecond, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled WaitIdle: %v", err)
	}
}
