package disrupt

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
)

func mustSpec(t *testing.T, text string) *Spec {
	t.Helper()
	s, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	return s
}

// noLeftovers fails t if a namespace of the run is still there.
func noLeftovers(t *testing.T, before []string) {
	t.Helper()
	after, _ := netns.List("cnb-")
	for _, n := range after {
		if !strings.Contains(strings.Join(before, " "), n) {
			t.Errorf("namespace %s left behind", n)
		}
	}
}

// The timeline's resolution checked: a blackhole of known length (200 ms)
// is measured within one bucket (100 ms) by both probes, and every event
// is on the timeline where it happened.
func TestPrivBlackholeWithinBucket(t *testing.T) {
	testns.NeedRoot(t)
	t.Setenv("CNIBENCH_STATE_DIR", t.TempDir())
	before, _ := netns.List("cnb-")
	defer noLeftovers(t, before)
	s := mustSpec(t, `
name: t
probes: [{kind: udp-rr, rate: 1000}, {kind: tcp-crr, rate: 200}]
settle: 500ms
spacing: 1500ms
repeats: 3
events: [{kind: blackhole, duration: 200ms}]
arms: [{name: veth, topology: veth}]
`)
	res, err := Run(context.Background(), s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := res.Arms[0]
	if !a.Restored {
		t.Error("rules not restored")
	}
	if a.ProbeCPUPct == nil {
		t.Errorf("probe CPU missing: %s", a.ProbeCPUReason)
	}
	for _, tl := range a.Timelines {
		if len(tl.Events) != 3 {
			t.Fatalf("%s: %d events, want 3", tl.Probe, len(tl.Events))
		}
		for i, e := range tl.Events {
			t.Logf("%s event %d at %.1f ms (change %.2f ms): gap %.1f ms, lost %d, recover %v", tl.Probe, i, e.StartMs, e.ChangeDurationMs, e.LongestGapMs, e.Failed+e.Timeouts, e.RecoverMs)
			if e.LongestGapMs < 200-tl.BucketMs || e.LongestGapMs > 200+tl.BucketMs {
				t.Errorf("%s event %d: gap %.1f ms, want 200 ± %g", tl.Probe, i, e.LongestGapMs, tl.BucketMs)
			}
			if want := 500 + 1500*float64(i); e.StartMs < want || e.StartMs > want+50 {
				t.Errorf("%s event %d starts at %.1f ms, want %.0f", tl.Probe, i, e.StartMs, want)
			}
		}
		// The hole shows in the buckets too: a bucket with nothing
		// answered right after each event's start.
		for _, e := range tl.Events {
			k := int((e.StartMs + tl.BucketMs) / tl.BucketMs)
			if b := tl.Buckets[k]; b.OK != 0 || b.Timeouts == 0 {
				t.Errorf("%s: bucket %d after a blackhole at %.0f ms: %+v", tl.Probe, k, e.StartMs, b)
			}
		}
	}
	ents, _ := os.ReadDir(journalDir())
	if len(ents) != 0 {
		t.Errorf("journal left after a restored run: %v", ents)
	}
}
