package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cnibench/cnibench/pkg/errkind"
)

// The latency prober: what `cnibench k8s latency`'s agent pods (one per
// node, started before the trials, so their own start-up is never
// measured) and its new pods run. It connects to each target every
// interval, each attempt on its own (a dropped SYN that takes the whole
// timeout does not delay the next attempt), and prints one JSON line per
// change of a target's state, the attempts taken in the order they
// started. The runner reads those lines from the pod's log and matches
// them with the instants it created its objects: latency = the start of
// the first attempt that saw the change − the API server's answer.

// Probe defaults: an attempt every 5 ms, the resolution of every figure,
// each given 100 ms to connect — far more than a SYN-ACK takes inside one
// cluster, and short enough that a dropped SYN is told apart soon; the
// attempts overlap, so the timeout costs no resolution.
const (
	ProbeInterval = 5 * time.Millisecond
	ProbeTimeout  = 100 * time.Millisecond
)

// Edge is one change of a probed target's state, as the prober prints it.
// The first line of each target is its first attempt (Prev 0).
type Edge struct {
	Target string `json:"target"`
	OK     bool   `json:"ok"`
	// At is when the first attempt in the new state started (Unix ns, the
	// prober's clock); Prev when the last attempt in the old state did.
	At   int64 `json:"at"`
	Prev int64 `json:"prev,omitempty"`
	// Err says why the first failing attempt failed: refused, timeout,
	// unreachable or the error.
	Err string `json:"err,omitempty"`
}

// ProbeTarget is one address a prober connects to, by name.
type ProbeTarget struct{ Name, Addr string }

// ParseProbeTarget reads NAME=HOST:PORT.
func ParseProbeTarget(s string) (ProbeTarget, error) {
	name, addr, ok := strings.Cut(s, "=")
	if _, _, err := net.SplitHostPort(addr); !ok || name == "" || err != nil {
		return ProbeTarget{}, errkind.Errorf(ErrInvalid, "--target %q: want NAME=HOST:PORT, e.g. svc=10.96.0.10:7421", s)
	}
	return ProbeTarget{name, addr}, nil
}

// Prober connects to its targets until ctx ends or, with UntilOK, until
// every target has answered once.
type Prober struct {
	Targets           []ProbeTarget
	Interval, Timeout time.Duration
	UntilOK           bool
	// Dial makes one attempt; nil is a TCP connect closed with a reset.
	Dial func(ctx context.Context, addr string, timeout time.Duration) error
}

// attempt is one finished attempt of one target.
type attempt struct {
	target, seq int
	start       time.Time
	err         error
}

// Run probes and hands every edge to emit, in start order per target.
func (p Prober) Run(ctx context.Context, emit func(Edge)) error {
	if len(p.Targets) == 0 {
		<-ctx.Done()
		return nil
	}
	interval, timeout, dial := p.Interval, p.Timeout, p.Dial
	if interval <= 0 {
		interval = ProbeInterval
	}
	if timeout <= 0 {
		timeout = ProbeTimeout
	}
	if dial == nil {
		dial = dialReset
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan attempt, 64)
	type state struct {
		next    int // the seq the state machine waits for
		pending map[int]attempt
		seen    bool
		ok      bool
		// answered: an attempt has succeeded (UntilOK counts each target once)
		answered bool
		last     time.Time // start of the last attempt in the current state
	}
	st := make([]state, len(p.Targets))
	for i := range st {
		st[i].pending = map[int]attempt{}
	}
	okLeft := len(p.Targets)
	seqs := make([]int, len(p.Targets))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	launch := func() {
		for i, t := range p.Targets {
			a := attempt{target: i, seq: seqs[i], start: time.Now()}
			seqs[i]++
			go func() {
				a.err = dial(ctx, t.Addr, timeout)
				select {
				case done <- a:
				case <-ctx.Done():
				}
			}()
		}
	}
	launch()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			launch()
		case a := <-done:
			s := &st[a.target]
			s.pending[a.seq] = a
			for {
				b, ok := s.pending[s.next]
				if !ok {
					break
				}
				delete(s.pending, s.next)
				s.next++
				if b.err != nil && ended(ctx) {
					continue // cut short by the end of the run, not an answer
				}
				good := b.err == nil
				if !s.seen || good != s.ok {
					e := Edge{Target: p.Targets[b.target].Name, OK: good, At: b.start.UnixNano()}
					if s.seen {
						e.Prev = s.last.UnixNano()
					}
					if !good {
						e.Err = failure(b.err)
					}
					emit(e)
					if good && !s.answered {
						s.answered = true
						if okLeft--; okLeft == 0 && p.UntilOK {
							return nil
						}
					}
					s.seen, s.ok = true, good
				}
				s.last = b.start
			}
		}
	}
}

// ended says whether ctx is over: cancelled, or past its deadline (the
// dialer's timer can fire a moment before the context's own does).
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// dialReset is one TCP connect; the connection is closed with a reset
// (linger 0), so thousands of attempts a minute leave no TIME_WAIT
// sockets to run the ephemeral ports out.
func dialReset(ctx context.Context, addr string, timeout time.Duration) error {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	return c.Close()
}

// failure names why an attempt failed, in the words the report uses.
func failure(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return err.Error()
}

// LatencyAgent is `cnibench k8s latency-agent`: it answers connections on
// Listen (a new pod's probes; the agent pod's readiness) and probes its
// targets, printing each Edge as a JSON line on out.
type LatencyAgent struct {
	Listen  string
	Targets []string
	UntilOK bool
	// Deadline ends an UntilOK run that has not seen every target answer
	// (an error naming them); 0 = none.
	Deadline time.Duration
	// KubeProxyMetrics, when set, makes the agent a kube-proxy watcher
	// instead (WatchKubeProxy on that address): it neither serves nor
	// probes.
	KubeProxyMetrics string
}

// Run serves and probes until ctx ends (or, with UntilOK, every target
// answered).
func (a LatencyAgent) Run(ctx context.Context, out io.Writer) error {
	if a.KubeProxyMetrics != "" {
		return WatchKubeProxy(ctx, a.KubeProxyMetrics, KubeProxyWatchInterval, out)
	}
	p := Prober{UntilOK: a.UntilOK}
	for _, s := range a.Targets {
		t, err := ParseProbeTarget(s)
		if err != nil {
			return err
		}
		p.Targets = append(p.Targets, t)
	}
	if a.Listen != "" {
		ln, err := net.Listen("tcp", a.Listen)
		if err != nil {
			return fmt.Errorf("listen %s: %w", a.Listen, err)
		}
		defer ln.Close()
		go ServeAccept(ln)
	}
	if a.UntilOK && a.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.Deadline)
		defer cancel()
	}
	enc := json.NewEncoder(out)
	answered := map[string]bool{}
	err := p.Run(ctx, func(e Edge) {
		_ = enc.Encode(e)
		if e.OK {
			answered[e.Target] = true
		}
	})
	if a.UntilOK && len(answered) < len(p.Targets) {
		var silent []string
		for _, t := range p.Targets {
			if !answered[t.Name] {
				silent = append(silent, t.Name+" ("+t.Addr+")")
			}
		}
		return fmt.Errorf("no answer within %s from %s", a.Deadline, strings.Join(silent, ", "))
	}
	return err
}

// ServeAccept accepts connections on ln and closes each at once: a
// connection accepted is the answer; it returns when ln is closed.
func ServeAccept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
