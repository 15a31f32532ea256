package engine

import (
	"math"
	"testing"
)

func TestHistDist(t *testing.T) {
	h := newLatHist()
	if h.latency() != nil {
		t.Fatal("empty histogram gave a latency")
	}
	// 1..1000 µs, one sample each
	for i := int64(1); i <= 1000; i++ {
		h.record(i * 1000)
	}
	d, ok := h.dist()
	if !ok || d.Count != 1000 {
		t.Fatalf("count %d", d.Count)
	}
	if *d.Mean != 500500 || *d.Min != 1000 || *d.Max != 1e6 {
		t.Errorf("exact stats: mean %v min %v max %v", *d.Mean, *d.Min, *d.Max)
	}
	wantSD := math.Sqrt((1000*1000-1)/12.0) * 1000 // discrete uniform
	if math.Abs(*d.Stddev-wantSD)/wantSD > 1e-6 {
		t.Errorf("stddev %v, want %v", *d.Stddev, wantSD)
	}
	for _, c := range []struct {
		got  *float64
		want float64
	}{{d.P50, 500e3}, {d.P90, 900e3}, {d.P99, 990e3}, {d.P999, 999e3}} {
		if math.Abs(*c.got-c.want)/c.want > 0.002 { // HDR at 3 significant digits
			t.Errorf("percentile %v, want %v", *c.got, c.want)
		}
	}
	l := h.latency()
	if *l.OneWayNs.Mean != 500500/2.0 || *l.OneWayNs.P50 != *l.RTTNs.P50/2 || l.OneWayNs.Count != 1000 {
		t.Errorf("one-way is not RTT/2: %+v", l.OneWayNs)
	}
	if n := len(l.CDF); n < 30 || n > 60 {
		t.Errorf("cdf has %d points, want 30-60", n)
	}
	if l.CDF[0].Ns != 1000 || l.CDF[len(l.CDF)-1].Ns != 1e6 {
		t.Errorf("cdf ends %v %v", l.CDF[0], l.CDF[len(l.CDF)-1])
	}
	for i := 1; i < len(l.CDF); i++ {
		if l.CDF[i].Ns < l.CDF[i-1].Ns || l.CDF[i].Percentile <= l.CDF[i-1].Percentile {
			t.Errorf("cdf not monotonic at %d: %v %v", i, l.CDF[i-1], l.CDF[i])
		}
	}
	// merge = the union
	h2 := newLatHist()
	h2.record(5)
	h.merge(h2)
	if d, _ := h.dist(); d.Count != 1001 || *d.Min != 5 {
		t.Errorf("merge: %+v", d)
	}
}

func TestHistAllocatesNothing(t *testing.T) {
	h := newLatHist()
	n := testing.AllocsPerRun(1000, func() { h.record(12345) })
	if n != 0 {
		t.Errorf("record allocates %v per call", n)
	}
}

func TestSeqTracker(t *testing.T) {
	tr := newSeqTracker(true, false)
	// 0 1 3 2 2 5 7 6: 4 never arrives; 2 arrives twice; 2 and 6 are late
	for _, s := range []uint64{0, 1, 3, 2, 2, 5, 7, 6} {
		tr.add(s, 0, 1000) // constant transit: no jitter
	}
	c := tr.count()
	if c.Received != 7 || c.OutOfOrder != 2 || c.Duplicated != 1 {
		t.Errorf("count %+v", c)
	}
	if u := udpBW(8, c); u.Lost != 1 || u.LossPct != 12.5 {
		t.Errorf("loss %+v", u)
	}
	if c.JitterNs == nil || *c.JitterNs != 0 {
		t.Errorf("jitter with constant transit: %v", c.JitterNs)
	}
	// RFC 3550: transit alternating by 1600 ns converges toward 1600
	j := newSeqTracker(true, false)
	for i := uint64(0); i < 2000; i++ {
		j.add(i, 0, int64(i%2)*1600)
	}
	if v := *j.count().JitterNs; math.Abs(v-1600) > 1 {
		t.Errorf("jitter %v, want ~1600", v)
	}
	// a jump beyond the window forgets old bits; a very late one is counted once
	w := newSeqTracker(false, false)
	w.add(0, 0, 0)
	w.add(seqWindow+10, 0, 0)
	w.add(10, 0, 0) // inside the window: not seen before
	w.add(1, 0, 0)  // older than the window
	if c := w.count(); c.Received != 4 || c.Duplicated != 0 || c.OutOfOrder != 2 || c.JitterNs != nil {
		t.Errorf("window: %+v", c)
	}
}

func TestSeqBytes(t *testing.T) {
	b := make([]byte, 1)
	putSeq(b, 0x1234)
	if !seqMatches(b, 0x34) || seqMatches(b, 0x35) {
		t.Error("1-byte sequence")
	}
	b = make([]byte, 64)
	putSeq(b, 1<<40+7)
	if !seqMatches(b, 1<<40+7) || seqMatches(b, 7) {
		t.Error("8-byte sequence")
	}
}

// Short datagrams carry only the measured flag in their first byte.
func TestShortDatagramHeader(t *testing.T) {
	b := make([]byte, 1)
	putUDPHdr(b, 5|measuredBit, 0)
	if b[0] != 0x80 {
		t.Errorf("measured 1-byte datagram = %#x, want 0x80", b[0])
	}
	putUDPHdr(b, 5, 0)
	if b[0] != 0x00 {
		t.Errorf("warmup 1-byte datagram = %#x, want 0x00", b[0])
	}
	c := newSeqTracker(false, true).count()
	if !c.CountOnly {
		t.Error("count-only tracker does not say so")
	}
}
