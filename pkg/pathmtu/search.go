package pathmtu

import (
	"fmt"

	"github.com/cnibench/cnibench/pkg/result"
)

// The search, apart from any socket: a prober sends one probe of a size
// and says what came back; search finds the largest size that is
// answered and which kind of failure bounds it from above.

// replyKind is what one probe brought back.
type replyKind int

const (
	// answered: the probe arrived whole and the server said so.
	answered replyKind = iota
	// lost: nothing came back within the timeout, neither the answer nor
	// an ICMP error.
	lost
	// icmpTooBig: a router answered with ICMP fragmentation-needed
	// (type 3, code 4), naming its next hop's MTU.
	icmpTooBig
	// localTooBig: the client's own kernel refused the size (EMSGSIZE):
	// larger than the MTU of its link toward the target, which it names.
	localTooBig
)

func (k replyKind) String() string {
	return [...]string{"answered", "lost", "ICMP frag-needed", "EMSGSIZE"}[k]
}

// reply is one probe's outcome; mtu is the MTU an icmpTooBig or a
// localTooBig named.
type reply struct {
	kind replyKind
	mtu  int
}

// prober sends one probe of size bytes (the IPv4 packet's length) and
// waits for its reply; an error is a failure of the probing itself (a
// port unreachable, a socket error), which ends the search.
type prober interface {
	probe(size int) (reply, error)
}

// search is a finished (or stopped) search.
type search struct {
	// link is the client's link MTU: the largest size its kernel sends.
	link int
	// good is the largest size answered; bad the smallest known not to
	// cross, and badBy what showed it (bad > link: nothing failed).
	good, bad int
	badBy     replyKind
	// icmp is the smallest next-hop MTU an ICMP error named (0: none).
	icmp   int
	probes int
}

// done reports whether the search narrowed the MTU to one size.
func (s *search) done() bool { return s.bad-s.good <= 1 }

// find searches the sizes from floor to link: floor first (it must be
// answered, or there is no responder to measure against), then link
// (most paths carry it, and one probe settles them), then by bisection,
// trying first a size an ICMP error or the kernel named. A size is sent
// up to attempts times before it counts as lost, so a datagram dropped by
// chance is not taken for a black hole. expired stops the search between
// probes (the caller's budget); the search then ends unfinished.
func find(p prober, link, floor, attempts int, expired func() bool) (*search, error) {
	s := &search{link: link, bad: link + 1}
	try := func(size int) (reply, error) {
		for i := 0; ; i++ {
			r, err := p.probe(size)
			s.probes++
			if err != nil || r.kind != lost || i+1 >= attempts || expired() {
				return r, err
			}
		}
	}
	r, err := try(floor)
	if err != nil {
		return s, err
	}
	if r.kind != answered {
		return s, fmt.Errorf("%w: a %d-byte probe brought %s (%d attempts)", ErrNoAnswer, floor, r.kind, attempts)
	}
	s.good = floor
	next := link
	for !s.done() && !expired() {
		size := next
		if size <= s.good || size >= s.bad {
			size = (s.good + s.bad) / 2
		}
		next = 0
		r, err := try(size)
		if err != nil {
			return s, err
		}
		switch r.kind {
		case answered:
			s.good = size
		case lost:
			s.bad, s.badBy = size, lost
		case icmpTooBig:
			if s.icmp == 0 || (r.mtu > 0 && r.mtu < s.icmp) {
				s.icmp = r.mtu
			}
			s.bad, s.badBy = size, icmpTooBig
			// The router said nothing above its next hop's MTU passes;
			// a router that names none (mtu 0, RFC 792's routers) or a
			// size it was not sent leaves bisection to find it.
			if r.mtu > s.good && r.mtu < size {
				s.bad, next = r.mtu+1, r.mtu
			}
		case localTooBig:
			// The link is smaller than first read (its MTU changed):
			// it, not the path, bounds what can be sent.
			s.bad, s.badBy = size, localTooBig
			if r.mtu > s.good && r.mtu < size {
				s.link, s.bad, next = r.mtu, r.mtu+1, r.mtu
			}
		}
	}
	return s, nil
}

// fill writes the search's outcome into p: the MTU and the verdict, or why
// there is none.
func (s *search) fill(p *result.PathMTU) {
	p.Probes = s.probes
	p.LinkMTU = ptr(s.link)
	if s.icmp > 0 {
		p.ICMPMTU = ptr(s.icmp)
	}
	if s.good == 0 {
		return
	}
	if !s.done() {
		p.SetMissing("mtu", fmt.Sprintf("the probe's time ran out with the MTU between %d and %d", s.good, s.bad-1))
		return
	}
	p.MTU = ptr(s.good)
	switch {
	case s.bad > s.link || s.badBy == localTooBig:
		p.Verdict = result.PathOK
	case s.badBy == lost:
		p.Verdict = result.PathBlackHole
		p.BlackHoleFrom = ptr(s.bad)
	default:
		p.Verdict = result.PathICMP
	}
}

func ptr(v int) *int { return &v }
