package k8s

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// freeLoopbackAddr is a loopback address nothing listens on (the kernel
// picked the port, and it was closed again).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// edgeLog collects a prober's edges.
type edgeLog struct {
	mu    sync.Mutex
	edges []Edge
	ch    chan Edge
}

func newEdgeLog() *edgeLog { return &edgeLog{ch: make(chan Edge, 100)} }

func (l *edgeLog) emit(e Edge) {
	l.mu.Lock()
	l.edges = append(l.edges, e)
	l.mu.Unlock()
	l.ch <- e
}

// next waits for the next edge.
func (l *edgeLog) next(t *testing.T) Edge {
	t.Helper()
	select {
	case e := <-l.ch:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no edge within 5s")
	}
	return Edge{}
}

// A real listener on loopback that appears after a delay is seen by the
// first attempt after it: within one interval (plus scheduling slack) of
// the listen, and the last refused attempt within that of it.
func TestProberSeesListenerAppear(t *testing.T) {
	addr := freeLoopbackAddr(t)
	const interval = 5 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := newEdgeLog()
	done := make(chan error, 1)
	go func() {
		done <- Prober{Targets: []ProbeTarget{{"t", addr}}, Interval: interval}.Run(ctx, l.emit)
	}()
	first := l.next(t)
	if first.OK || first.Err != "refused" || first.Prev != 0 {
		t.Fatalf("first edge %+v: want a refusal with no previous attempt", first)
	}
	time.Sleep(150 * time.Millisecond)
	before := time.Now()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	defer ln.Close()
	go ServeAccept(ln)
	up := l.next(t)
	// slack covers the ticker's and the goroutines' scheduling on a
	// loaded 2-vCPU machine; the interval is the resolution claimed.
	const slack = 15 * time.Millisecond
	if !up.OK || up.Target != "t" {
		t.Fatalf("second edge %+v: want a success", up)
	}
	if at := time.Unix(0, up.At); at.Before(before.Add(-interval)) || at.After(after.Add(interval+slack)) {
		t.Errorf("success seen at listen%+v, want within %s after the listen (%s)", at.Sub(after), interval, after.Sub(before))
	}
	if res := time.Duration(up.At - up.Prev); res <= 0 || res > interval+slack {
		t.Errorf("resolution %s (last refusal to first success), want (0, %s]", res, interval+slack)
	}
	ln.Close()
	down := l.next(t)
	if down.OK || down.Err != "refused" || time.Duration(down.At-down.Prev) > interval+slack {
		t.Errorf("after close: %+v, want a refusal within an interval of the last success", down)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// An attempt that hangs until its timeout (a dropped SYN) does not hold
// back the next ones: the success after it is seen one interval after the
// path opens, not one timeout, and edges still come in start order.
func TestProberTimeoutDoesNotDelay(t *testing.T) {
	const interval, timeout = 5 * time.Millisecond, 300 * time.Millisecond
	var mu sync.Mutex
	var open time.Time // zero while the path drops
	dial := func(ctx context.Context, _ string, to time.Duration) error {
		mu.Lock()
		o := open
		mu.Unlock()
		if o.IsZero() {
			select {
			case <-time.After(to):
			case <-ctx.Done():
			}
			return &net.OpError{Op: "dial", Err: timeoutErr{}}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := newEdgeLog()
	go func() {
		_ = Prober{Targets: []ProbeTarget{{"t", "x:1"}}, Interval: interval, Timeout: timeout, Dial: dial}.Run(ctx, l.emit)
	}()
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	open = time.Now()
	mu.Unlock()
	first := l.next(t)
	if first.OK || first.Err != "timeout" {
		t.Fatalf("first edge %+v: want a timeout", first)
	}
	up := l.next(t)
	if !up.OK {
		t.Fatalf("second edge %+v: want a success", up)
	}
	if d := time.Unix(0, up.At).Sub(open); d > interval+15*time.Millisecond {
		t.Errorf("success attempt started %s after the path opened; want within one interval (%s), not a timeout (%s)", d, interval, timeout)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// The new pod's mode: it exits once every target answered, or at its
// deadline with the silent ones named.
func TestLatencyAgentUntilOK(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go ServeAccept(ln)
	var out bytes.Buffer
	a := LatencyAgent{Targets: []string{"n1=" + ln.Addr().String()}, UntilOK: true, Deadline: 5 * time.Second}
	if err := a.Run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	es := ParseEdges(out.Bytes())
	if len(es) != 1 || !es[0].OK || es[0].Target != "n1" {
		t.Fatalf("edges %+v from %q: want one success of n1", es, out.String())
	}

	silent := freeLoopbackAddr(t)
	out.Reset()
	a = LatencyAgent{Targets: []string{"n1=" + ln.Addr().String(), "n2=" + silent}, UntilOK: true, Deadline: 200 * time.Millisecond}
	err = a.Run(context.Background(), &out)
	if err == nil || !strings.Contains(err.Error(), "n2 ("+silent+")") || strings.Contains(err.Error(), "n1") {
		t.Fatalf("err = %v; want n2 named as silent, n1 not", err)
	}
	if es := ParseEdges(out.Bytes()); len(es) != 2 {
		t.Errorf("edges %+v: want n1's success and n2's refusal", es)
	}

	_, err = ParseProbeTarget("10.0.0.1:80")
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("a target without a name: %v, want ErrInvalid", err)
	}
}
