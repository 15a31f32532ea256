package disrupt

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestCPUWire: the readings a pod prints come back in time order among
// other lines, and the CPU of a window is interpolated at both ends.
func TestCPUWire(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var b bytes.Buffer
	b.WriteString("echo started\n")
	// 20 ms of CPU per second, written out of order.
	for _, s := range []int{2, 0, 1, 3} {
		if err := WriteCPU(&b, CPUReading{At: t0.Add(time.Duration(s) * time.Second), CPU: time.Duration(s) * 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	b.WriteString("cnb-disrupt-requests udp-rr 1/1 xyz\n")
	rs, err := DecodeCPU(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 || !rs[0].At.Equal(t0) || rs[3].CPU != 60*time.Millisecond {
		t.Fatalf("readings %+v", rs)
	}
	got, err := CPUBetween(rs, t0.Add(500*time.Millisecond), t0.Add(2500*time.Millisecond))
	if err != nil || got != 40*time.Millisecond {
		t.Errorf("CPU over 0.5–2.5 s = %v, %v; want 40ms", got, err)
	}
	if got, err := CPUBetween(rs, t0, t0.Add(3*time.Second)); err != nil || got != 60*time.Millisecond {
		t.Errorf("CPU over the readings' own span = %v, %v; want 60ms", got, err)
	}
	// A window the readings do not cover has no figure.
	if _, err := CPUBetween(rs, t0.Add(-time.Second), t0.Add(time.Second)); !errors.Is(err, ErrNoCPU) {
		t.Errorf("window before the first reading: %v, want ErrNoCPU", err)
	}
	if _, err := CPUBetween(nil, t0, t0.Add(time.Second)); !errors.Is(err, ErrNoCPU) {
		t.Errorf("no readings: %v, want ErrNoCPU", err)
	}
	if _, err := DecodeCPU([]byte("cnb-disrupt-cpu 12 x\n")); err == nil {
		t.Error("a malformed CPU line was read")
	}
}

// TestSpanWire: a blackhole pod's spans come back in order; a gap in the
// count or a span ending before its start is refused.
func TestSpanWire(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var b bytes.Buffer
	b.WriteString("blackhole pod started\n")
	for k := 0; k < 3; k++ {
		s := Span{Start: t0.Add(time.Duration(k) * time.Second), End: t0.Add(time.Duration(k)*time.Second + 201*time.Millisecond)}
		if err := WriteSpan(&b, k, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := DecodeSpans(b.Bytes())
	if err != nil || len(got) != 3 || !got[2].Start.Equal(t0.Add(2*time.Second)) || got[1].End.Sub(got[1].Start) != 201*time.Millisecond {
		t.Fatalf("spans %+v, %v", got, err)
	}
	for _, bad := range []string{
		"cnb-disrupt-span 1 1800000000000000000 1800000000200000000\n", // k 1 first
		"cnb-disrupt-span 0 1800000000200000000 1800000000000000000\n", // ends before it starts
		"cnb-disrupt-span 0 1800000000000000000\n",                     // a field short
	} {
		if _, err := DecodeSpans([]byte(bad)); err == nil {
			t.Errorf("%q was read", bad)
		}
	}
}
