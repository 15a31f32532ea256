package disrupt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/netns"
)

// ProbeKind names a steady probe.
type ProbeKind string

// The probes. Both are open-loop: request i is sent at start + i/rate
// whatever became of the earlier ones, so a stall shows as unanswered
// requests at their own instants instead of as a pause in sending.
const (
	// UDPRR sends one UDP datagram per request and waits for its echo.
	// UDP because TCP's retransmission backoff would stretch a gap past
	// the outage that caused it (a 200 ms drop costs a 200 ms RTO and then
	// its doubling), and the timeline should show the datapath's outage.
	UDPRR ProbeKind = "udp-rr"
	// TCPCRR opens a TCP connection per request (connect, 8 bytes each
	// way, close): what a client sees of NAT and conntrack changes, SYN
	// retransmissions included.
	TCPCRR ProbeKind = "tcp-crr"
)

// ProbeKinds lists the probes, for help and errors.
var ProbeKinds = []ProbeKind{UDPRR, TCPCRR}

// Probe defaults: measured to cost well under 5 % of a CPU (docs/lab.md).
const (
	DefaultUDPRate = 1000.0
	DefaultCRRRate = 200.0
	DefaultTimeout = 500 * time.Millisecond
	// ProbePort is the engine's port: the lab's Service VIP forwards it
	// (TCP and UDP) to the server pod.
	ProbePort = 7420
	// maxRate bounds the probes: past it the probe itself would load the
	// datapath it watches.
	maxRate = 20000
)

// Echo answers the probes inside a namespace: a UDP socket that returns
// every datagram and a TCP listener that returns 8 bytes and closes.
type Echo struct {
	udp *net.UDPConn
	tcp *net.TCPListener
	wg  sync.WaitGroup
}

// StartEcho listens on port (UDP and TCP, every address) inside ns. The
// sockets are made on a thread inside ns and stay there; serving them
// needs no namespace switch.
func StartEcho(ns string, port int) (*Echo, error) {
	e := &Echo{}
	err := netns.Do(ns, func() error {
		u, err := net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		if err != nil {
			return fmt.Errorf("echo: listen udp :%d in %s: %w", port, ns, err)
		}
		t, err := net.ListenTCP("tcp4", &net.TCPAddr{Port: port})
		if err != nil {
			u.Close()
			return fmt.Errorf("echo: listen tcp :%d in %s: %w", port, ns, err)
		}
		e.udp, e.tcp = u, t
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		buf := make([]byte, 64)
		for {
			n, from, err := e.udp.ReadFromUDPAddrPort(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			_, _ = e.udp.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	go func() {
		defer e.wg.Done()
		for {
			c, err := e.tcp.AcceptTCP()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				var b [8]byte
				if _, err := readFull(c, b[:]); err == nil {
					_, _ = c.Write(b[:])
				}
			}()
		}
	}()
	return e, nil
}

// Close stops the echo and waits for its loops.
func (e *Echo) Close() {
	e.udp.Close()
	e.tcp.Close()
	e.wg.Wait()
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// ProbeSpec is a probe's configuration.
type ProbeSpec struct {
	Kind    ProbeKind
	Rate    float64 // requests per second
	Timeout time.Duration
}

// Check refuses a probe that cannot run or would load what it watches.
func (p ProbeSpec) Check() error {
	switch p.Kind {
	case UDPRR, TCPCRR:
	default:
		return fmt.Errorf("probe %q: want one of %v", p.Kind, ProbeKinds)
	}
	if p.Rate <= 0 || p.Rate > maxRate {
		return fmt.Errorf("probe rate %g/s: want more than 0 and at most %d", p.Rate, maxRate)
	}
	if p.Timeout < time.Millisecond || p.Timeout > 10*time.Second {
		return fmt.Errorf("probe timeout %s: want 1ms to 10s", p.Timeout)
	}
	return nil
}

// Run sends requests from inside namespace ns to target, the first at t0,
// until stop ends, and returns every request in send order once the last
// one is answered or timed out. Only ctx's end is an error: stop is how
// the caller ends a probe that went well. The probe has no length of its
// own: an event that takes minutes (iptables-restore of a large ruleset
// on a busy host) is watched to its end.
func (p ProbeSpec) Run(ctx, stop context.Context, ns string, target netip.AddrPort, t0 time.Time) ([]Request, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	interval := time.Duration(float64(time.Second) / p.Rate)
	switch p.Kind {
	case UDPRR:
		return p.runUDP(ctx, stop, ns, target, t0, interval)
	default:
		return p.runCRR(ctx, stop, ns, target, t0, interval)
	}
}

// waitUntil sleeps until t or ctx ends; false when ctx ended.
func waitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (p ProbeSpec) runUDP(ctx, stop context.Context, ns string, target netip.AddrPort, t0 time.Time, interval time.Duration) ([]Request, error) {
	var conn *net.UDPConn
	err := netns.Do(ns, func() error {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(target))
		conn = c
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("probe: udp socket in %s: %w", ns, err)
	}
	// Grown by the sender, read by the receiver, both under mu.
	var reqs []Request
	var sentAt []time.Time
	var answered []bool
	var mu sync.Mutex
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		buf := make([]byte, 64)
		for {
			k, err := conn.Read(buf)
			now := time.Now()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				// An ICMP error on the connected socket names no
				// request: the request it answers times out.
				continue
			}
			if k < 8 {
				continue
			}
			seq := binary.BigEndian.Uint64(buf)
			mu.Lock()
			if seq >= uint64(len(reqs)) {
				mu.Unlock()
				continue
			}
			if !answered[seq] && !sentAt[seq].IsZero() && reqs[seq].Outcome != Failed {
				answered[seq] = true
				lat := now.Sub(sentAt[seq])
				if lat <= p.Timeout {
					reqs[seq].Outcome, reqs[seq].Latency = OK, lat
				}
			}
			mu.Unlock()
		}
	}()
	var buf [16]byte
	sent := 0
	for i := 0; ; i++ {
		if !waitUntil(stop, t0.Add(time.Duration(i)*interval)) {
			break
		}
		binary.BigEndian.PutUint64(buf[:], uint64(i))
		mu.Lock()
		now := time.Now()
		sentAt = append(sentAt, now)
		answered = append(answered, false)
		reqs = append(reqs, Request{Sent: now.Sub(t0), Outcome: Timeout})
		mu.Unlock()
		if _, err := conn.Write(buf[:]); err != nil {
			mu.Lock()
			reqs[i].Outcome = Failed
			mu.Unlock()
		}
		sent = i + 1
	}
	// The last requests get their full timeout.
	if sent > 0 {
		mu.Lock()
		last := sentAt[sent-1]
		mu.Unlock()
		waitUntil(ctx, last.Add(p.Timeout))
	}
	conn.Close()
	<-recvDone
	return reqs[:sent], ctx.Err()
}

// runCRR makes each request's socket on one thread inside ns (socket and
// a non-blocking connect, microseconds), then hands it to a goroutine
// that may run anywhere: the socket stays in the namespace it was made
// in, so no thread per outstanding connection has to sit in ns.
func (p ProbeSpec) runCRR(ctx, stop context.Context, ns string, target netip.AddrPort, t0 time.Time, interval time.Duration) ([]Request, error) {
	// One Request per connection, each written by its own goroutine: the
	// list of them grows, the Requests do not move.
	var reqs []*Request
	var wg sync.WaitGroup
	sa := &unix.SockaddrInet4{Port: int(target.Port()), Addr: target.Addr().As4()}
	err := netns.Do(ns, func() error {
		for i := 0; ; i++ {
			if !waitUntil(stop, t0.Add(time.Duration(i)*interval)) {
				return nil
			}
			start := time.Now()
			r := &Request{Sent: start.Sub(t0), Outcome: Timeout}
			reqs = append(reqs, r)
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("probe: tcp socket in %s: %w", ns, err)
			}
			if err := unix.Connect(fd, sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
				unix.Close(fd)
				r.Outcome = Failed
				continue
			}
			wg.Add(1)
			go func(i, fd int) {
				defer wg.Done()
				r.Outcome, r.Latency = p.exchange(fd, i, start)
			}(i, fd)
		}
	})
	wg.Wait()
	if err != nil {
		return nil, err
	}
	out := make([]Request, len(reqs))
	for i, r := range reqs {
		out[i] = *r
	}
	return out, ctx.Err()
}

// exchange finishes one connect-per-request transaction on a connecting
// socket: 8 bytes out, 8 back, close.
func (p ProbeSpec) exchange(fd, i int, start time.Time) (Outcome, time.Duration) {
	f := os.NewFile(uintptr(fd), "probe")
	c, err := net.FileConn(f) // dups fd into the poller
	f.Close()
	if err != nil {
		return Failed, 0
	}
	defer c.Close()
	deadline := start.Add(p.Timeout)
	_ = c.SetDeadline(deadline)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	if _, err := c.Write(b[:]); err != nil {
		return outcomeOf(err), 0
	}
	if _, err := readFull(c, b[:]); err != nil {
		return outcomeOf(err), 0
	}
	lat := time.Since(start)
	if lat > p.Timeout {
		return Timeout, 0
	}
	return OK, lat
}

func outcomeOf(err error) Outcome {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return Timeout
	}
	return Failed
}
