// Package pathmtu measures what a path carries: the largest IPv4 packet
// that crosses it from a client to a server, with don't-fragment UDP
// probes the server answers, and the MSS TCP negotiates over it.
//
// A path is one of three things. Its packets cross up to the client's own
// link MTU ("ok at N"). A router on it cannot forward a size and says so
// with ICMP fragmentation-needed, naming its next hop's MTU, and that size
// crosses ("limited by ICMP at N"). Or a size above N neither arrives nor
// brings an ICMP error back — a firewall dropping the ICMP, a tunnel that
// drops what it cannot encapsulate —, which is a path MTU black hole
// ("black hole above N"): TCP over it stalls on full-size segments while
// small requests work. The search (search.go) tells them apart; the probes
// (udp.go) read the kernel's own answers through IP_RECVERR; the server
// side is `cnibench server`'s UDP port or a Responder (responder.go).
//
// Probe is bounded: each probe waits Timeout, a silent size is tried
// Attempts times, and the whole path takes at most Budget (2 s).
package pathmtu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/result"
)

// ErrInvalid is wrapped by every error about Options themselves.
var ErrInvalid = errors.New("invalid path MTU probe")

// ErrNoAnswer is wrapped when not even the smallest probe was answered:
// nothing that answers probes listens at the target (a reference tool's
// server, an older cnibench), or the path drops UDP altogether.
var ErrNoAnswer = errors.New("no answer to the path MTU probe: is a cnibench server (or the lab's responder) listening on the target's UDP port?")

// ErrRefused is wrapped when the target's kernel answered with ICMP port
// unreachable: nothing listens on that UDP port.
var ErrRefused = errors.New("the target refused the probe (ICMP port unreachable): nothing listens on that UDP port")

// ErrUnreachable is wrapped when the path answered a probe with another
// ICMP destination unreachable (no route, host unreachable, filtered).
var ErrUnreachable = errors.New("the target is unreachable")

// ErrBudget is wrapped when the budget ran out before the search narrowed
// the MTU to one size (a path that loses many probes).
var ErrBudget = errors.New("path MTU probe unfinished")

// Defaults of Options.
const (
	DefaultTimeout  = 100 * time.Millisecond
	DefaultAttempts = 2
	DefaultBudget   = 2 * time.Second
	// floorSize is the first size tried: every IPv4 host accepts 576 bytes
	// (RFC 791), so a path that does not answer it has no responder, not a
	// small MTU.
	floorSize = 576
	// tcpTimeout bounds the MSS reading's connection, within the budget.
	tcpTimeout = 300 * time.Millisecond
)

// Options say what to probe and how long to wait.
type Options struct {
	// Target is the server's IPv4 address and port; UDP probes go to that
	// port, and the MSS is read on a TCP connection to the same port.
	Target string
	// Netns is the client's named network namespace; "" = this one.
	Netns string
	// Timeout is how long one probe waits for its answer or an ICMP
	// error, Attempts how often a silent size is sent before it counts as
	// lost, Budget the whole probe's bound. Zero: the defaults.
	Timeout  time.Duration
	Attempts int
	Budget   time.Duration
}

func (o Options) withDefaults() Options {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Attempts == 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Budget == 0 {
		o.Budget = DefaultBudget
	}
	return o
}

// target checks the options and returns the parsed target.
func (o Options) target() (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(o.Target)
	if err != nil {
		return ap, errkind.Errorf(ErrInvalid, "target %q: want IPv4:PORT (%v)", o.Target, err)
	}
	if !ap.Addr().Unmap().Is4() || ap.Port() == 0 {
		return ap, errkind.Errorf(ErrInvalid, "target %q: want an IPv4 address and a port other than 0 (IPv6 paths are not probed)", o.Target)
	}
	switch {
	case o.Timeout < 0 || o.Attempts < 0 || o.Budget < 0:
		return ap, errkind.Errorf(ErrInvalid, "timeout %v, attempts %d, budget %v: none may be negative", o.Timeout, o.Attempts, o.Budget)
	case o.Budget > 0 && o.Budget < 2*tcpTimeout:
		return ap, errkind.Errorf(ErrInvalid, "budget %v: at least %v (the TCP reading alone may take %v)", o.Budget, 2*tcpTimeout, tcpTimeout)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

// Probe measures the path from the client (o.Netns) to o.Target: the UDP
// search, then the MSS of a TCP connection to the same address, which
// then also reflects what the search taught the kernel. The result is
// non-nil unless the options are invalid; the error is non-nil when the
// MTU could not be measured (then the result's Missing["mtu"] says the
// same). A failed MSS reading is only in Missing["tcp_mss"].
func Probe(ctx context.Context, o Options) (*result.PathMTU, error) {
	o = o.withDefaults()
	target, err := o.target()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	p := &result.PathMTU{Target: target.String()}
	defer func() { p.Seconds = time.Since(start).Seconds() }()
	// The search leaves the TCP reading its share of the budget.
	searchEnd := start.Add(o.Budget - tcpTimeout)
	expired := func() bool { return ctx.Err() != nil || time.Now().After(searchEnd) }

	var u *udpProber
	if err := inNetns(o.Netns, func() (err error) { u, err = openUDP(target, o.Timeout); return }); err != nil {
		return missing(p, err)
	}
	defer u.close()
	if before, err := u.kernelPMTU(); err == nil {
		p.KernelPMTU = ptr(before)
	}
	s, err := u.search(o, expired)
	if s != nil {
		s.fill(p)
	}
	if after, perr := u.kernelPMTU(); perr == nil {
		p.KernelPMTU = ptr(after)
	}
	if err == nil && p.MTU == nil {
		if err = ctx.Err(); err == nil {
			err = fmt.Errorf("%w: %s", ErrBudget, p.Missing["mtu"])
		}
	}
	if err != nil {
		if _, known := p.Missing["mtu"]; !known {
			p.SetMissing("mtu", err.Error())
		}
	}
	readMSS(ctx, o.Netns, target, p)
	return p, err
}

// search reads the link's MTU and searches below it.
func (u *udpProber) search(o Options, expired func() bool) (*search, error) {
	link, first, err := u.linkMTU()
	if err != nil {
		return nil, err
	}
	floor := min(floorSize, link)
	if floor < minSize {
		return nil, fmt.Errorf("link MTU %d: smaller than a probe (%d bytes)", link, minSize)
	}
	if first != nil && first.kind == answered {
		// Loopback: the largest packet there is crossed at once.
		s := &search{link: link, good: link, bad: link + 1, probes: 1}
		return s, nil
	}
	s, err := find(u, link, floor, o.Attempts, expired)
	if s != nil && first != nil {
		s.probes++
	}
	return s, err
}

func missing(p *result.PathMTU, err error) (*result.PathMTU, error) {
	p.SetMissing("mtu", err.Error())
	p.SetMissing("tcp_mss", "the UDP probe could not start")
	return p, err
}

// inNetns runs fn in the named namespace ("" = here); sockets it opens
// stay in that namespace when used from any thread afterwards.
func inNetns(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	return netns.Do(name, fn)
}

// tcpiOptTimestamps is TCPI_OPT_TIMESTAMPS (linux/tcp.h): both sides
// agreed on timestamps, 12 bytes of options in every segment.
const tcpiOptTimestamps = 1

// readMSS connects over TCP to the target and records the MSS the kernel
// negotiated, or why it could not be read.
func readMSS(ctx context.Context, ns string, target netip.AddrPort, p *result.PathMTU) {
	ctx, cancel := context.WithTimeout(ctx, tcpTimeout)
	defer cancel()
	var ti *unix.TCPInfo
	err := inNetns(ns, func() error {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp4", target.String())
		if err != nil {
			return err
		}
		// The client closes first, so TIME_WAIT stays on its side and the
		// server's port is free for whatever binds it next.
		defer c.Close()
		raw, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			return err
		}
		var gerr error
		if err := raw.Control(func(fd uintptr) { ti, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
			return err
		}
		return gerr
	})
	if err != nil {
		p.SetMissing("tcp_mss", fmt.Sprintf("TCP connection to %s: %v", target, err))
		return
	}
	// Both MSS figures the kernel keeps are net of the options every
	// segment carries; the MSS on the wire (the SYN's option) is not.
	opts := 0
	if ti.Options&tcpiOptTimestamps != 0 {
		opts = 12
	}
	p.TCPMSS, p.TCPSndMSS, p.TCPAdvMSS, p.TCPPMTU = ptr(int(ti.Snd_mss)+opts), ptr(int(ti.Snd_mss)), ptr(int(ti.Advmss)+opts), ptr(int(ti.Pmtu))
}
