package experiment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/wakeup"
)

// fakeWakeup records which policy was in force around each step.
type fakeWakeup struct {
	started []wakeup.Policy
	live    int
}

func (f *fakeWakeup) Start(p wakeup.Policy) (func() error, error) {
	f.started = append(f.started, p)
	f.live++
	return func() error { f.live--; return nil }, nil
}

// fakeStamper marks the steps listed in bad (by call number, from 1) as
// disturbed.
type fakeStamper struct {
	n   int
	bad map[int]bool
}

func (f *fakeStamper) Start() func() *result.Disturbance {
	f.n++
	n := f.n
	return func() *result.Disturbance {
		d := &result.Disturbance{OthersCPUPct: 1}
		if f.bad[n] {
			d.OthersCPUPct, d.Disturbed, d.Why = 50, true, []string{"other processes 50% CPU"}
		}
		return d
	}
}

const condExp = `
name: cond
tests: [tcp_lat]
repeats: 2
wakeup: auto
arms:
  - {name: a, topology: veth}
  - {name: b, topology: veth, wakeup: spin, cpus: "client=0"}
`

func TestConditionsPerArmAndStamped(t *testing.T) {
	e := mustParse(t, condExp)
	w := &fakeWakeup{}
	sink := &memSink{}
	m := &fakeMeasurer{}
	if _, err := Execute(context.Background(), e, Options{Labs: &fakeLabs{}, Measurer: m, Sink: sink,
		Wakeup: w, Disturb: &fakeStamper{}}); err != nil {
		t.Fatal(err)
	}
	if w.live != 0 {
		t.Errorf("%d policies still in force after the run", w.live)
	}
	// The idle wake-up probe first: none, hold three times over on the
	// baseline (first) arm, at its placement; none starts nothing.
	// Then a: auto → hold for tcp_lat; b: its own spin. Interleaved a b / b a.
	if got := fmt.Sprint(w.started); got != "[hold hold hold hold spin spin hold]" {
		t.Errorf("policies started: %s", got)
	}
	if len(m.reqs) != 6+4 || m.reqs[0].Spec.Test != "tcp_lat" || m.reqs[0].Spec.Duration != idleProbeDuration ||
		m.reqs[0].Engine != DefaultEngine {
		t.Fatalf("probe requests: %d requests, first %+v", len(m.reqs), m.reqs[0])
	}
	m.reqs = m.reqs[6:]
	for i, s := range sink.samples {
		c := s.Result.Conditions
		if c == nil || c.Disturbance == nil || c.IdleWakeup == nil || c.IdleWakeupUs == nil ||
			c.IdleWakeup.Arm != "a" || c.IdleWakeup.Rounds != 3 || *c.IdleWakeupUs != c.IdleWakeup.NoneUs-c.IdleWakeup.HoldUs {
			t.Fatalf("sample %d conditions %+v", i, c)
		}
		switch s.Arm.Name {
		case "a":
			if c.Wakeup != "hold" || c.WakeupWhy != "auto: hold for request/response tests" || c.ClientCPU == nil {
				t.Errorf("arm a conditions %+v", c)
			}
		case "b":
			if c.Wakeup != "spin" || c.WakeupWhy != "" || c.ClientCPU == nil || *c.ClientCPU != 0 || c.ServerCPU != nil {
				t.Errorf("arm b conditions %+v", c)
			}
		}
	}
	// a: the default placement (client and server on the last two CPUs);
	// b: client=0 only.
	def := DefaultPlacement(usableCPUs())
	if a, b := m.reqs[0].Spec, m.reqs[1].Spec; fmt.Sprint(ptrs(a.ClientCPU, a.ServerCPU)) != fmt.Sprint(ptrs(def.Client, def.Server)) ||
		b.ClientCPU == nil || *b.ClientCPU != 0 || b.ServerCPU != nil {
		t.Errorf("placement not passed to the measurer: %+v / %+v", a, b)
	}
}

// ptrs dereferences CPU numbers for comparison (-1 = not pinned).
func ptrs(p ...*int) []int {
	out := make([]int, len(p))
	for i, v := range p {
		out[i] = -1
		if v != nil {
			out[i] = *v
		}
	}
	return out
}

func TestRetakeDisturbed(t *testing.T) {
	e := mustParse(t, condExp)
	sink := &memSink{}
	// Steps 2 and 3 (b #1 and b #2 in the rotated order) are disturbed.
	_, err := Execute(context.Background(), e, Options{Labs: &fakeLabs{}, Measurer: &fakeMeasurer{}, Sink: sink,
		Wakeup: &fakeWakeup{}, Disturb: &fakeStamper{bad: map[int]bool{2: true, 3: true}}, RetakeDisturbed: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(sink.samples) != 6 || !sink.complete {
		t.Fatalf("%d samples (want 4 planned + 2 retakes), complete=%v", len(sink.samples), sink.complete)
	}
	for i, s := range sink.samples[4:] {
		orig := sink.samples[1+i]
		c := s.Result.Conditions
		if c.RetakeOf == nil || *c.RetakeOf != orig.Step.Seq || s.Arm != orig.Arm || s.Step.Seq != 4+i {
			t.Errorf("retake %d: %+v of %+v", i, s.Step, orig.Step)
		}
		if !orig.Result.Conditions.Disturbance.Disturbed {
			t.Errorf("the original of retake %d is not the disturbed one", i)
		}
	}
	// Without the option nothing is retaken.
	sink = &memSink{}
	if _, err := Execute(context.Background(), e, Options{Labs: &fakeLabs{}, Measurer: &fakeMeasurer{}, Sink: sink,
		Disturb: &fakeStamper{bad: map[int]bool{2: true}}}); err != nil {
		t.Fatal(err)
	}
	if len(sink.samples) != 4 {
		t.Errorf("%d samples without --retake-disturbed", len(sink.samples))
	}
}

func TestConditionsParseErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"wakeup: poll\n", `wake-up policy "poll"`},
		{"cpus: client=4096\n", "CPU 4096 does not exist"},
		{"cpus: cli=0\n", "neither client nor server"},
		{"cpus: client=x\n", "client=N,server=M"},
	} {
		_, err := Parse([]byte("name: x\ntests: [tcp_lat]\n"+tc.yaml+"arms:\n  - {name: a, topology: veth}\n"), "x.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
	_, err := Parse([]byte("name: x\ntests: [tcp_lat]\narms:\n  - {name: a, topology: veth, wakeup: nap}\n"), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "arm a (line 4)") {
		t.Errorf("arm wakeup error %v", err)
	}
	e := mustParse(t, condExp)
	if err := e.Override(Overrides{CPUs: "server=9999"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("--cpus server=9999: %v", err)
	}
	if err := e.Override(Overrides{Wakeup: "spin"}); err != nil || e.Wakeup != "spin" || e.Arms[1].Wakeup != "" {
		t.Errorf("--wakeup spin: %v, %q %q", err, e.Wakeup, e.Arms[1].Wakeup)
	}
}

// In a precision-driven run, retakes fit in what is left of the budget;
// the disturbed steps left over keep their value for the precision rule.
func TestRetakeDisturbedWithinBudget(t *testing.T) {
	e := mustParse(t, condExp)
	e.Precision, e.Budget = 0.05, Duration(12500*time.Millisecond)
	sink := &memSink{}
	x := &executor{e: e, o: Options{Labs: &fakeLabs{}, Measurer: &fakeMeasurer{}, Sink: sink, RetakeDisturbed: true},
		ctx: context.Background(), runID: 7, prog: newProgress(nil, false), values: map[cellKey][]float64{},
		cond: &conditions{}}
	x.labs = map[string]LabInstance{}
	for i := range e.Arms {
		x.labs[e.Arms[i].LabKey()] = &fakeLab{name: "veth"}
	}
	x.done, x.sinceRetake = 10, 10
	for i := 0; i < 5; i++ {
		x.disturbed = append(x.disturbed, pendingRetake{Step{Seq: i, Arm: i % 2, Test: "tcp_lat", MsgSize: 1}, float64(100 + i), true})
	}
	// 10 steps in 10 s: 1 s a step, 2.5 s of the 12.5 s budget left.
	n, err := x.retakeDisturbed(time.Now().Add(-10 * time.Second))
	if err != nil || n != 2 || x.notRetaken != 3 {
		t.Fatalf("retook %d (err %v), not retaken %d; want 2 and 3", n, err, x.notRetaken)
	}
	if len(sink.samples) != 2 || *sink.samples[0].Step.RetakeOf != 0 || *sink.samples[1].Step.RetakeOf != 1 {
		t.Errorf("retakes stored: %+v", sink.samples)
	}
	var kept []float64
	for _, v := range x.values {
		kept = append(kept, v...)
	}
	if fmt.Sprint(sortedCopy(kept)) != "[0.001 0.002 102 103 104]" {
		t.Errorf("precision values %v: want the 3 not retaken (102-104) and the 2 retakes' own", sortedCopy(kept))
	}
}

func sortedCopy(v []float64) []float64 {
	out := append([]float64(nil), v...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// When most of a round was disturbed, nothing is retaken: the samples keep
// their values for the precision rule and the status says why.
func TestNoRetakesOnAMachineDisturbedThroughout(t *testing.T) {
	e := mustParse(t, condExp)
	sink := &memSink{}
	// 3 of the 4 planned steps disturbed.
	if _, err := Execute(context.Background(), e, Options{Labs: &fakeLabs{}, Measurer: &fakeMeasurer{}, Sink: sink,
		Disturb: &fakeStamper{bad: map[int]bool{1: true, 2: true, 3: true}}, RetakeDisturbed: true}); err != nil {
		t.Fatal(err)
	}
	if len(sink.samples) != 4 || !strings.Contains(sink.status, "3 disturbed steps not retaken: most of their round was disturbed") {
		t.Errorf("%d samples, status %q", len(sink.samples), sink.status)
	}
}

func TestDefaultPlacement(t *testing.T) {
	for ncpu, want := range map[int]string{1: "none", 2: "client=0,server=1", 8: "client=6,server=7"} {
		p, err := ParsePlacement("auto", ncpu)
		if err != nil || p.String() != want {
			t.Errorf("auto on %d CPUs = %s, %v; want %s", ncpu, p, err, want)
		}
		if q, _ := ParsePlacement("", ncpu); q.String() != want {
			t.Errorf("unset on %d CPUs = %s; want %s", ncpu, q, want)
		}
	}
	if p, _ := ParsePlacement("none", 8); p.String() != "none" {
		t.Errorf("none = %s", p)
	}
}

// A probe that cannot measure leaves the penalty missing with the reason
// (never a zero), and the run goes on.
func TestIdleWakeupProbeFailureIsMissing(t *testing.T) {
	e := mustParse(t, condExp)
	x := &executor{e: e, o: Options{Measurer: failingMeasurer{}, Wakeup: &fakeWakeup{}}, ctx: context.Background(),
		labs: map[string]LabInstance{e.Arms[0].LabKey(): &fakeLab{name: "veth"}}}
	w := x.probeIdleWakeup()
	if w == nil || !strings.Contains(w.Missing, "the probe failed under none: no route") || w.PenaltyUs != 0 {
		t.Fatalf("probe = %+v", w)
	}
	res := result.New(result.Tool{Name: "builtin"}, "tcp_lat", 1)
	stamp(res, wakeup.Hold, "", w, Placement{}, nil)
	if res.Conditions.IdleWakeupUs != nil || res.Conditions.IdleWakeup.Missing == "" {
		t.Errorf("a missing penalty stamped as %+v", res.Conditions)
	}
	// No request/response test: nothing to probe.
	e.Tests = []string{"tcp_bw"}
	if w := x.probeIdleWakeup(); w != nil {
		t.Errorf("probe on a stream-only run: %+v", w)
	}
}

type failingMeasurer struct{}

func (failingMeasurer) Measure(context.Context, MeasureRequest) (*result.Result, error) {
	return nil, errors.New("no route")
}
