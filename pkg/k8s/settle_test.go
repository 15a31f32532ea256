package k8s

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

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
	// A cancelled context ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := WaitIdle(ctx, stats([2]uint64{50, 50}), 70, time.Millisecond, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled WaitIdle: %v", err)
	}
}

// TestExecuteSettle: with SettleIdle every client node gets a wait-idle
// probe before the first client pod, and nothing is left afterwards.
func TestExecuteSettle(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	o := testOptions()
	o.SettleIdle = 70
	var log bytes.Buffer
	o.Log = &log
	ctx := context.Background()
	r, plan := fc.prepare(t, o)
	if err := r.Execute(ctx, plan, o, func(Sample) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, p := range fc.createdPods() {
		switch a := p.Spec.Containers[0].Args; {
		case len(a) > 1 && a[1] == "wait-idle":
			if argAfter(a, "--min-idle") != "70" {
				t.Errorf("settle probe args %v", a)
			}
			order = append(order, "settle:"+pinnedNode(p))
		case p.Labels[LabelRole] == "client":
			order = append(order, "client")
		}
	}
	// Every scenario's client node is n1 here (n2 serves the cross-node ones).
	if i := slices.Index(order, "client"); i != 1 || order[0] != "settle:n1" {
		t.Errorf("pods in creation order %v; want the settle probe on n1 first, then the clients", order)
	}
	if !strings.Contains(log.String(), "settle: n1: 93 % idle") {
		t.Errorf("log does not report the settle: %s", log.String())
	}
	fc.wantClean(t)
}

// TestExecuteSettleTimeoutMeasuresAnyway: a node that never settles is a
// warning in the log, and the run still measures.
func TestExecuteSettleTimeoutMeasuresAnyway(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	fc.probeState = func(pod *corev1.Pod) {
		if a := pod.Spec.Containers[0].Args; len(a) > 1 && a[1] == "wait-idle" {
			pod.Status.Phase = corev1.PodFailed
		}
	}
	o := testOptions()
	o.Scenarios = []string{ScenarioCrossNode}
	o.SettleIdle = 70
	var log bytes.Buffer
	o.Log = &log
	ctx := context.Background()
	r, plan := fc.prepare(t, o)
	measured := 0
	if err := r.Execute(ctx, plan, o, func(Sample) error { measured++; return nil }); err != nil {
		t.Fatal(err)
	}
	if measured == 0 || !strings.Contains(log.String(), "settle: n1: WARNING: measuring anyway") {
		t.Errorf("%d samples; log: %s", measured, log.String())
	}
}
