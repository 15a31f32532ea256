package experiment

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/result"
)

// healthLab is a fake lab whose datapath can fail (broken).
type healthLab struct {
	fakeLab
	broken atomic.Bool
}

func (l *healthLab) Health() error {
	if l.broken.Load() {
		return errors.New("ovs-vswitchd of node2 (pid 42) exited; last error in its log: conntrack.c:1063: assertion failed")
	}
	return nil
}

// healthLabs builds healthLabs; the Up numbers in failUps fail.
type healthLabs struct {
	mu      sync.Mutex
	built   []*healthLab
	downs   []string
	failUps map[int]bool
}

func (f *healthLabs) Up(_ context.Context, spec *lab.Spec) (LabInstance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failUps[len(f.built)+1] {
		f.built = append(f.built, nil)
		return nil, errors.New("ovn-overlay: rebuild refused")
	}
	l := &healthLab{fakeLab: fakeLab{name: spec.Source(), mu: &f.mu, downs: &f.downs}}
	f.built = append(f.built, l)
	return l, nil
}

// crashMeasurer breaks the lab of its crashAt-th measurement and then
// hangs, as a client whose datapath died does, until its context ends.
type crashMeasurer struct {
	labs    *healthLabs
	n       int
	crashAt int
}

func (m *crashMeasurer) Measure(ctx context.Context, req MeasureRequest) (*result.Result, error) {
	m.n++
	if m.n == m.crashAt {
		m.labs.mu.Lock()
		for _, l := range m.labs.built {
			if l != nil && strings.HasPrefix(req.ClientNetns, l.name) {
				l.broken.Store(true)
			}
		}
		m.labs.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return nil, errors.New("the step hung for 10 s: the health watch did not end it")
		}
	}
	r := result.New(result.Tool{Name: req.Engine}, req.Spec.Test, req.Spec.MsgSize)
	r.Transactions = &result.Transactions{Count: 100}
	return r, nil
}

const ovnTwoArms = `
name: crash
tests: [tcp_lat]
duration: 200ms
warmup: 0s
repeats: 3
arms:
  - name: ovn
    topology: ovn-overlay
  - name: veth
    topology: veth
`

// A datapath that fails during a step: that step (only) is an error
// naming the daemon and its log line, found at once rather than at the
// tools' time-outs; the lab is rebuilt and the arm's next steps measure
// on the new one; the run completes.
func TestDatapathFailureRebuildsTheLab(t *testing.T) {
	e := mustParse(t, ovnTwoArms)
	labs := &healthLabs{}
	m := &crashMeasurer{labs: labs, crashAt: 4} // repeat 1 runs veth then ovn (arm order rotates)
	sink := &memSink{}
	var out strings.Builder
	start := time.Now()
	_, err := Execute(context.Background(), e, Options{Labs: labs, Measurer: m, Sink: sink, Progress: &out})
	var sf *StepsFailedError
	if !errors.As(err, &sf) || sf.Failed != 1 || sf.Total != 6 {
		t.Fatalf("Execute: %v; want 1 of 6 steps failed", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the failed step took the run %v", d)
	}
	var failed []Sample
	for _, s := range sink.samples {
		if s.Error != "" {
			failed = append(failed, s)
		}
	}
	if len(failed) != 1 || failed[0].Arm.Name != "ovn" || !strings.Contains(failed[0].Error, "failed during the step") ||
		!strings.Contains(failed[0].Error, "ovs-vswitchd of node2 (pid 42) exited; last error in its log: conntrack.c:1063") {
		t.Fatalf("failed samples %+v", failed)
	}
	// The ovn lab twice (built, rebuilt), the veth lab once; the broken
	// one went down at the rebuild, the others at the end.
	if len(labs.built) != 3 || !labs.built[0].broken.Load() || labs.built[2].broken.Load() {
		t.Errorf("labs built %v", labs.built)
	}
	if len(labs.downs) != 3 || labs.downs[0] != "ovn-overlay" {
		t.Errorf("downs %v", labs.downs)
	}
	if !strings.Contains(out.String(), "rebuilt as ovn-overlay") {
		t.Errorf("progress does not say the lab was rebuilt:\n%s", out.String())
	}
}

// When the lab cannot be rebuilt, its arm stops — each of its later steps
// fails at once, naming why — and the other arms go on.
func TestDatapathFailureRebuildFails(t *testing.T) {
	e := mustParse(t, ovnTwoArms)
	labs := &healthLabs{failUps: map[int]bool{3: true}}
	sink := &memSink{}
	_, err := Execute(context.Background(), e, Options{Labs: labs, Measurer: &crashMeasurer{labs: labs, crashAt: 4}, Sink: sink})
	var sf *StepsFailedError
	if !errors.As(err, &sf) || sf.Failed != 2 {
		t.Fatalf("Execute: %v; want the crashed step and the arm's last one failed", err)
	}
	ok := map[string]int{}
	for _, s := range sink.samples {
		if s.Error == "" {
			ok[s.Arm.Name]++
		} else if s.Arm.Name == "ovn" && !strings.Contains(s.Error, "failed during the step") && !strings.Contains(s.Error, "rebuilding it failed: ovn-overlay: rebuild refused") {
			t.Errorf("ovn step error %q", s.Error)
		}
	}
	if ok["veth"] != 3 || ok["ovn"] != 1 {
		t.Errorf("successful steps %v, want veth 3 and ovn 1", ok)
	}
}

// zeroMeasurer moves nothing: its results count no transaction.
type zeroMeasurer struct{}

func (zeroMeasurer) Measure(_ context.Context, req MeasureRequest) (*result.Result, error) {
	r := result.New(result.Tool{Name: req.Engine}, req.Spec.Test, req.Spec.MsgSize)
	r.Transactions = &result.Transactions{Count: 0}
	r.UDP = &result.UDP{Sent: 500}
	return r, nil
}

func TestStepThatMovedNothingIsAnError(t *testing.T) {
	e := mustParse(t, "name: z\ntests: [udp_lat]\nduration: 100ms\nwarmup: 0s\nrepeats: 1\narms: [{name: a, topology: veth}]")
	sink := &memSink{}
	_, err := Execute(context.Background(), e, Options{Labs: &fakeLabs{}, Measurer: zeroMeasurer{}, Sink: sink})
	var sf *StepsFailedError
	if !errors.As(err, &sf) || len(sink.samples) != 1 || sink.samples[0].Result != nil ||
		sink.samples[0].Error != "the step moved no traffic in its whole measured window (500 datagrams sent, none received)" {
		t.Fatalf("err %v, samples %+v", err, sink.samples)
	}
	for _, c := range []struct {
		r    *result.Result
		want string
	}{
		{&result.Result{}, ""}, // says nothing: not judged
		{&result.Result{Transactions: &result.Transactions{Count: 1}}, ""},
		{&result.Result{Throughput: &result.Throughput{ReceiverBps: result.F(0)}}, "no transaction completed and no byte was received"},
		{&result.Result{Throughput: &result.Throughput{ReceiverBps: result.F(0), SenderBps: result.F(1e6)}}, ""},
	} {
		if got := movedNothing(c.r); got != c.want {
			t.Errorf("movedNothing(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
}
