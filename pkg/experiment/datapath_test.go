package experiment

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/result"
)

// fakeMeter counts its windows and reports one second of PMD time.
type fakeMeter struct{ starts, stops atomic.Int32 }

func (m *fakeMeter) Start(context.Context) error { m.starts.Add(1); return nil }
func (m *fakeMeter) Stop(context.Context) (*result.DatapathCPU, map[string]string) {
	m.stops.Add(1)
	return &result.DatapathCPU{Process: "ovs-vswitchd", Seconds: result.F(0.5), Pct: result.F(50)},
		map[string]string{"pmd_busy_pct": "no PMD"}
}

// clientMeasurer plays a client: it signals its start, then "measures" for
// run and returns n transactions.
type clientMeasurer struct {
	run time.Duration
	n   int64
}

func (c clientMeasurer) Measure(ctx context.Context, _ MeasureRequest) (*result.Result, error) {
	driver.ClientStarted(ctx)
	time.Sleep(c.run)
	return &result.Result{Test: result.TCPLat, Transactions: &result.Transactions{Count: c.n}}, nil
}

func TestMeteredMeasurerWindow(t *testing.T) {
	m := &fakeMeter{}
	var outerHook atomic.Int32
	ctx := driver.WithClientStarted(context.Background(), func() { outerHook.Add(1) })
	req := MeasureRequest{Spec: driver.Spec{Warmup: 10 * time.Millisecond, Duration: 30 * time.Millisecond}}
	res, err := meteredMeasurer{inner: clientMeasurer{run: 80 * time.Millisecond, n: 1000}, m: m}.Measure(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if m.starts.Load() != 1 || m.stops.Load() != 1 {
		t.Errorf("windows: %d starts, %d stops, want 1 and 1", m.starts.Load(), m.stops.Load())
	}
	if outerHook.Load() != 1 {
		t.Errorf("the outer (profile) hook ran %d times, want 1", outerHook.Load())
	}
	d := res.CPU.Datapath
	if d == nil || d.UsPerTransaction == nil || *d.UsPerTransaction != 500 {
		t.Fatalf("datapath CPU %+v: want 0.5 s over 1000 transactions = 500 us each", d)
	}
	if res.Missing["cpu.datapath.pmd_busy_pct"] != "no PMD" || res.Missing["cpu.datapath.seconds_per_gb"] == "" {
		t.Errorf("missing: %v", res.Missing)
	}

	// A client that ends inside its warmup opens no window: the figure is
	// missing with the reason, never a zero.
	m2 := &fakeMeter{}
	res, err = meteredMeasurer{inner: clientMeasurer{run: time.Millisecond, n: 1}, m: m2}.Measure(context.Background(),
		MeasureRequest{Spec: driver.Spec{Warmup: 200 * time.Millisecond, Duration: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if m2.starts.Load() != 0 || (res.CPU != nil && res.CPU.Datapath != nil) || res.Missing["cpu.datapath"] == "" {
		t.Errorf("early end: starts %d, cpu %+v, missing %v", m2.starts.Load(), res.CPU, res.Missing)
	}
}
