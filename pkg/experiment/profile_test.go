package experiment

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/result"
)

type fakeProfiler struct {
	starts, stops []time.Time
	failStart     bool
}

func (f *fakeProfiler) Start() error {
	if f.failStart {
		return errors.New("no events")
	}
	f.starts = append(f.starts, time.Now())
	return nil
}

func (f *fakeProfiler) Stop() (*profile.Profile, error) {
	f.stops = append(f.stops, time.Now())
	return &profile.Profile{Samples: 1, Stacks: map[string]uint64{"a": 1}}, nil
}

// hookMeasurer "runs a client" for d after announcing its start.
type hookMeasurer struct{ d time.Duration }

func (m hookMeasurer) Measure(ctx context.Context, req MeasureRequest) (*result.Result, error) {
	time.Sleep(5 * time.Millisecond) // server start
	driver.ClientStarted(ctx)
	time.Sleep(m.d)
	return &result.Result{}, nil
}

func TestMeasureProfiledWindow(t *testing.T) {
	req := MeasureRequest{Spec: driver.Spec{Warmup: 40 * time.Millisecond, Duration: 60 * time.Millisecond}}
	p := &fakeProfiler{}
	t0 := time.Now()
	_, prof, why, err := measureProfiled(context.Background(), hookMeasurer{150 * time.Millisecond}, req, p)
	if err != nil || prof == nil || why != "" {
		t.Fatalf("measureProfiled = %v, %q, %v", prof, why, err)
	}
	if len(p.starts) != 1 || len(p.stops) != 1 {
		t.Fatalf("%d starts, %d stops", len(p.starts), len(p.stops))
	}
	// The window opens after server start + warmup and lasts the duration,
	// not until the client exits.
	if d := p.starts[0].Sub(t0); d < 45*time.Millisecond {
		t.Errorf("sampling started %v after the call, before the warmup ended", d)
	}
	if w := p.stops[0].Sub(p.starts[0]); w < 55*time.Millisecond || w > 120*time.Millisecond {
		t.Errorf("window %v, want about the 60ms duration", w)
	}

	// A client that ends within its warmup gives no profile, with the reason.
	p = &fakeProfiler{}
	_, prof, why, _ = measureProfiled(context.Background(), hookMeasurer{10 * time.Millisecond}, req, p)
	time.Sleep(60 * time.Millisecond) // a late timer must not start sampling
	if prof != nil || why == "" || len(p.starts) != 0 {
		t.Errorf("short client: profile %v, why %q, %d starts", prof, why, len(p.starts))
	}

	p = &fakeProfiler{failStart: true}
	_, prof, why, _ = measureProfiled(context.Background(), hookMeasurer{150 * time.Millisecond}, req, p)
	if prof != nil || why == "" {
		t.Errorf("failed start: profile %v, why %q", prof, why)
	}
}
