package disrupt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Besides its requests (wire.go), a pod of `k8s disrupt` prints lines the
// runner reads back: its CPU readings, and a blackhole pod's spans.
//
// A probe or echo that runs in a pod reports its own CPU through its log, so the runner can say what the probing cost where it ran — the
// figure the lab takes from its own getrusage. A line is one reading:
//
//	cnb-disrupt-cpu <unix ns> <user+system ns>
//
// A probe prints one before its first request and one after its last; the
// echo, which runs until it is deleted, one every CPUEvery.
const cpuPrefix = "cnb-disrupt-cpu "

// CPUEvery is how often the echo reports its CPU: the ends of the probing
// window are interpolated between readings this far apart.
const CPUEvery = time.Second

// ErrNoCPU is matched by CPUBetween's errors: the readings do not cover
// the window, or none could be taken.
var ErrNoCPU = errors.New("no CPU readings around the window")

// CPUReading is this process's user+system time at an instant.
type CPUReading struct {
	At  time.Time
	CPU time.Duration
}

// ReadSelfCPU is a reading of this process now; ok is false when
// getrusage failed.
func ReadSelfCPU() (CPUReading, bool) {
	c := selfCPU()
	return CPUReading{At: time.Now(), CPU: c}, c >= 0
}

// WriteCPU writes r as the line DecodeCPU reads.
func WriteCPU(w io.Writer, r CPUReading) error {
	_, err := fmt.Fprintf(w, "%s%d %d\n", cpuPrefix, r.At.UnixNano(), int64(r.CPU))
	return err
}

// DecodeCPU reads the CPU lines of a log, in time order; other lines
// are skipped, a malformed CPU line is an error.
func DecodeCPU(log []byte) ([]CPUReading, error) {
	var out []CPUReading
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), cpuPrefix)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 {
			return nil, fmt.Errorf("CPU line %q: want 2 fields", rest)
		}
		at, err1 := strconv.ParseInt(f[0], 10, 64)
		cpu, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || at <= 0 || cpu < 0 {
			return nil, fmt.Errorf("CPU line %q: want two non-negative integers", rest)
		}
		out = append(out, CPUReading{At: time.Unix(0, at), CPU: time.Duration(cpu)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// CPUBetween is the CPU spent from start to end, each end interpolated
// linearly between the readings around it.
func CPUBetween(rs []CPUReading, start, end time.Time) (time.Duration, error) {
	a, okA := cpuAt(rs, start)
	b, okB := cpuAt(rs, end)
	if !okA || !okB {
		if len(rs) == 0 {
			return 0, fmt.Errorf("%w: the log holds none", ErrNoCPU)
		}
		return 0, fmt.Errorf("%w: readings from %s to %s, window %s to %s", ErrNoCPU,
			clockOf(rs[0].At), clockOf(rs[len(rs)-1].At), clockOf(start), clockOf(end))
	}
	return time.Duration(b - a), nil
}

// cpuAt is the CPU reading at t, linear between the readings just before
// and just after it.
func cpuAt(rs []CPUReading, t time.Time) (float64, bool) {
	i := sort.Search(len(rs), func(i int) bool { return !rs[i].At.Before(t) })
	switch {
	case i < len(rs) && rs[i].At.Equal(t):
		return float64(rs[i].CPU), true
	case i == 0 || i == len(rs):
		return 0, false
	}
	p, n := rs[i-1], rs[i]
	f := float64(t.Sub(p.At)) / float64(n.At.Sub(p.At))
	return float64(p.CPU) + f*float64(n.CPU-p.CPU), true
}

func clockOf(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// spanPrefix starts a line in which a blackhole pod reports one hold:
//
//	cnb-disrupt-span <k> <start unix ns> <end unix ns>
//
// k counting from 0, start when the kernel took the drop rule, end when
// the rule was gone.
const spanPrefix = "cnb-disrupt-span "

// Span is one change a pod made, on its own clock.
type Span struct {
	Start, End time.Time
}

// WriteSpan writes the k-th span as the line DecodeSpans reads.
func WriteSpan(w io.Writer, k int, s Span) error {
	_, err := fmt.Fprintf(w, "%s%d %d %d\n", spanPrefix, k, s.Start.UnixNano(), s.End.UnixNano())
	return err
}

// DecodeSpans reads a log's span lines; they must count 0, 1, 2, … and
// each end after its start.
func DecodeSpans(log []byte) ([]Span, error) {
	var out []Span
	for _, line := range strings.Split(string(log), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), spanPrefix)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		var v [3]int64
		if len(f) != 3 {
			return nil, fmt.Errorf("span line %q: want 3 fields", rest)
		}
		for i := range v {
			n, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("span line %q: %q is not an integer", rest, f[i])
			}
			v[i] = n
		}
		if v[0] != int64(len(out)) || v[2] < v[1] || v[1] <= 0 {
			return nil, fmt.Errorf("span line %q: out of order or ending before it starts", rest)
		}
		out = append(out, Span{Start: time.Unix(0, v[1]), End: time.Unix(0, v[2])})
	}
	return out, nil
}
