package pathmtu

import (
	"errors"
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
)

// fakePath answers probes as a path would: the client's link, then a
// router whose next hop is smaller (answering with frag-needed or
// silently dropping), then maybe a black hole further on, and chance loss.
type fakePath struct {
	link     int  // the client's link MTU
	hop      int  // a router's next-hop MTU (0: none)
	icmp     bool // the router sends frag-needed for sizes above hop
	icmpMTU  int  // the MTU its frag-needed names (default hop; 0 = an RFC 792 router)
	farHole  int  // sizes above this vanish further on (0: none)
	loseNth  int  // every loseNth datagram is lost by chance (0: none)
	sent     []int
	dropped  int
	nameZero bool
}

func (f *fakePath) probe(size int) (reply, error) {
	f.sent = append(f.sent, size)
	if size > f.link {
		return reply{localTooBig, f.link}, nil
	}
	if f.loseNth > 0 && len(f.sent)%f.loseNth == 0 {
		f.dropped++
		return reply{kind: lost}, nil
	}
	if f.hop > 0 && size > f.hop {
		if !f.icmp {
			return reply{kind: lost}, nil
		}
		m := f.hop
		if f.nameZero {
			m = 0
		}
		return reply{icmpTooBig, m}, nil
	}
	if f.farHole > 0 && size > f.farHole {
		return reply{kind: lost}, nil
	}
	return reply{kind: answered}, nil
}

func never() bool { return false }

func run(t *testing.T, f *fakePath, attempts int) *result.PathMTU {
	t.Helper()
	s, err := find(f, f.link, min(floorSize, f.link), attempts, never)
	if err != nil {
		t.Fatalf("find: %v (sent %v)", err, f.sent)
	}
	p := &result.PathMTU{}
	s.fill(p)
	if p.MTU == nil {
		t.Fatalf("no MTU: %v (sent %v)", p.Missing, f.sent)
	}
	return p
}

func TestFindOKInTwoProbes(t *testing.T) {
	f := &fakePath{link: 1500}
	p := run(t, f, 2)
	if *p.MTU != 1500 || p.Verdict != result.PathOK || p.Probes != 2 || p.BlackHoleFrom != nil || p.ICMPMTU != nil {
		t.Fatalf("got %+v after %v, want ok at 1500 in 2 probes (576, 1500)", p, f.sent)
	}
}

func TestFindICMPLimitedInThreeProbes(t *testing.T) {
	f := &fakePath{link: 1500, hop: 1400, icmp: true}
	p := run(t, f, 2)
	if *p.MTU != 1400 || p.Verdict != result.PathICMP || p.ICMPMTU == nil || *p.ICMPMTU != 1400 || p.Probes != 3 {
		t.Fatalf("got %+v after %v, want limited by ICMP at 1400 in 3 probes", p, f.sent)
	}
}

func TestFindBlackHole(t *testing.T) {
	f := &fakePath{link: 1500, hop: 1400}
	p := run(t, f, 2)
	if *p.MTU != 1400 || p.Verdict != result.PathBlackHole || p.BlackHoleFrom == nil || *p.BlackHoleFrom != 1401 || p.ICMPMTU != nil {
		t.Fatalf("got %+v after %v, want black hole above 1400 from 1401", p, f.sent)
	}
	// Every size that vanished was sent twice before it counted.
	count := map[int]int{}
	for _, s := range f.sent {
		count[s]++
	}
	for s, n := range count {
		if s > 1400 && n != 2 {
			t.Errorf("size %d sent %d times, want 2", s, n)
		}
		if s <= 1400 && n != 1 {
			t.Errorf("answered size %d sent %d times, want 1", s, n)
		}
	}
}

// Every MTU of a path is found exactly, whichever way the path bounds it.
func TestFindEveryMTU(t *testing.T) {
	for hop := 600; hop < 1500; hop += 37 {
		for _, icmp := range []bool{true, false} {
			for _, zero := range []bool{false, true} {
				if zero && !icmp {
					continue
				}
				f := &fakePath{link: 1500, hop: hop, icmp: icmp, nameZero: zero}
				p := run(t, f, 2)
				want := result.PathBlackHole
				if icmp {
					want = result.PathICMP
				}
				if *p.MTU != hop || p.Verdict != want {
					t.Fatalf("hop %d icmp %v naming zero %v: got %d %s after %v", hop, icmp, zero, *p.MTU, p.Verdict, f.sent)
				}
				if p.Probes > 40 {
					t.Errorf("hop %d: %d probes", hop, p.Probes)
				}
			}
		}
	}
}

// A black hole beyond a router that does send frag-needed: the black hole
// bounds the path, and the ICMP it saw is kept.
func TestFindBlackHoleBelowICMP(t *testing.T) {
	f := &fakePath{link: 9000, hop: 1500, icmp: true, farHole: 1450}
	p := run(t, f, 2)
	if *p.MTU != 1450 || p.Verdict != result.PathBlackHole || *p.BlackHoleFrom != 1451 || p.ICMPMTU == nil || *p.ICMPMTU != 1500 {
		t.Fatalf("got %+v after %v", p, f.sent)
	}
}

// With every second datagram lost by chance, two attempts per size still
// find the link's MTU; with one attempt, chance loss looks like a black
// hole — which is why sizes are retried.
func TestFindRetriesChanceLoss(t *testing.T) {
	f := &fakePath{link: 1500, loseNth: 2}
	p := run(t, f, 2)
	if *p.MTU != 1500 || p.Verdict != result.PathOK || f.dropped == 0 {
		t.Fatalf("two attempts: got %+v after %v (%d dropped)", p, f.sent, f.dropped)
	}
	f = &fakePath{link: 1500, loseNth: 2}
	p = run(t, f, 1)
	if p.Verdict != result.PathBlackHole {
		t.Fatalf("one attempt, every second datagram lost: got %+v after %v, want a (false) black hole", p, f.sent)
	}
}

func TestFindNoAnswer(t *testing.T) {
	f := &fakePath{link: 1500, hop: 500} // even 576 is dropped silently
	_, err := find(f, 1500, floorSize, 2, never)
	if !errors.Is(err, ErrNoAnswer) || len(f.sent) != 2 {
		t.Fatalf("err %v after %v, want ErrNoAnswer after 2 probes", err, f.sent)
	}
}

// A search stopped by its budget says between which sizes the MTU is,
// never a size it did not establish.
func TestFindBudgetStops(t *testing.T) {
	f := &fakePath{link: 1500, hop: 1000}
	n := 0
	s, err := find(f, 1500, floorSize, 2, func() bool { n++; return n > 4 })
	if err != nil {
		t.Fatal(err)
	}
	p := &result.PathMTU{}
	s.fill(p)
	if p.MTU != nil || p.Missing["mtu"] == "" || p.Verdict != "" {
		t.Fatalf("got %+v, want no MTU and why", p)
	}
}

// The link's MTU learned late (the kernel refused a size) bounds the
// search: the path is ok at the link.
func TestFindLinkSmallerThanRead(t *testing.T) {
	f := &fakePath{link: 1280}
	s, err := find(f, 1500, floorSize, 2, never)
	if err != nil {
		t.Fatal(err)
	}
	p := &result.PathMTU{}
	s.fill(p)
	if p.MTU == nil || *p.MTU != 1280 || p.Verdict != result.PathOK || *p.LinkMTU != 1280 {
		t.Fatalf("got %+v after %v", p, f.sent)
	}
}

func TestWire(t *testing.T) {
	b := make([]byte, 1400-ipUDPHeaders)
	encodeProbe(b, 7, 1400)
	a, ok := Answer(b[:100], len(b)) // a reader that kept only the start
	if !ok {
		t.Fatal("a probe was not answered")
	}
	id, got, ok := parseAnswer(a)
	if !ok || id != 7 || got != len(b) || len(a) > len(b) {
		t.Fatalf("answer %x: id %d got %d ok %v", a, id, got, ok)
	}
	for _, junk := range [][]byte{nil, []byte("cnbPMTU"), []byte("hello, not a probe at all")} {
		if _, ok := Answer(junk, len(junk)); ok {
			t.Errorf("%q answered", junk)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{{Target: "10.0.0.1"}, {Target: "[::1]:7420"}, {Target: "10.0.0.1:0"},
		{Target: "host:7420"}, {Target: "10.0.0.1:7420", Budget: 100e6}, {Target: "10.0.0.1:7420", Attempts: -1}} {
		if _, err := o.target(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", o, err)
		}
	}
	if _, err := (Options{Target: "10.0.0.1:7420"}).target(); err != nil {
		t.Error(err)
	}
}
