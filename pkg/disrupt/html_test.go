package disrupt

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/headless"
)

// fixtureResult is two arms of 2 s timelines, the baseline with a 200 ms
// hole after each of its two events (timeouts, then failures) and the
// other unharmed.
func fixtureResult() *Result {
	marks := []Mark{
		{Kind: "endpoint-change", Start: 500 * time.Millisecond, End: 520 * time.Millisecond},
		{Kind: "endpoint-change", Label: "revert", Start: 1200 * time.Millisecond, End: 1203 * time.Millisecond},
	}
	cpu := 12 * time.Millisecond
	marks[0].AgentCPU, marks[1].AgentCPU = &cpu, &cpu
	hole := steady(2000, 500*time.Millisecond, 700*time.Millisecond, Timeout)
	for i := 1200; i < 1400; i++ {
		hole[i].Outcome = Failed
	}
	quiet := steady(2000, 0, 0, OK)
	r := &Result{Name: "fixture", Description: "two arms", Baseline: "ipt", Started: time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC), Arms: []*ArmResult{
		{Name: "ipt", Topology: "native", Knobs: map[string]string{"proxy": "iptables", "services": "10000"}, Target: "10.96.0.10:7420", Restored: true, ProbeCPUReason: "fixture",
			Timelines: []*Timeline{Build("udp-rr", 1000, 500*time.Millisecond, 100*time.Millisecond, 2*time.Second, hole, marks)}},
		{Name: "nft", Topology: "native", Knobs: map[string]string{"proxy": "nftables", "services": "10000"}, Target: "10.96.0.10:7420", Restored: true, ProbeCPUReason: "fixture",
			Timelines: []*Timeline{Build("udp-rr", 1000, 500*time.Millisecond, 100*time.Millisecond, 2*time.Second, quiet, marks)}},
	}}
	r.Comparisons = Compare(r)
	return r
}

var (
	svgRE   = regexp.MustCompile(`(?s)<svg[^>]*>(.*?)</svg>`)
	eventRE = regexp.MustCompile(`<rect class="event" x="([0-9.]+)"`)
	barRE   = regexp.MustCompile(`<rect x="([0-9.]+)" y="([0-9.]+)" width="[0-9.]+" height="([0-9.]+)" fill="#4e79a7"`)
)

// The timeline as a person sees it: Chromium renders one chart per
// timeline with its bars, latency lines and a marker per event at the
// event's instant, and the page logs nothing to its console.
// CNIBENCH_SCREENSHOT=FILE.png saves what Chromium drew.
func TestTimelineInChromium(t *testing.T) {
	var page bytes.Buffer
	if err := WriteHTML(&page, fixtureResult()); err != nil {
		t.Fatal(err)
	}
	// The console capture must be able to fail.
	if _, console := headless.Render(t, []byte(`<!doctype html><html><body><script>undefined_fn()</script></body></html>`), ""); len(console) == 0 {
		t.Fatal("a page with a script error logged nothing: the console capture does not work")
	}
	dom, console := headless.Render(t, page.Bytes(), os.Getenv("CNIBENCH_SCREENSHOT"))
	if len(console) > 0 {
		t.Errorf("the page logged to the console:\n%s", strings.Join(console, "\n"))
	}
	charts := svgRE.FindAllStringSubmatch(dom, -1)
	if len(charts) != 2 {
		t.Fatalf("Chromium's DOM has %d charts, want 2 (one per arm's timeline)", len(charts))
	}
	for i, c := range charts {
		marks := eventRE.FindAllStringSubmatch(c[1], -1)
		if len(marks) != 2 {
			t.Fatalf("chart %d: %d event markers, want 2", i, len(marks))
		}
		// 1100 px wide, 64 px left margin, 1016 px for 2 s: the events at
		// 0.5 s and 1.2 s are at 318 and 673.6 px.
		for k, want := range []float64{64 + 0.25*1016, 64 + 0.6*1016} {
			got, _ := strconv.ParseFloat(marks[k][1], 64)
			if got < want-1 || got > want+1 {
				t.Errorf("chart %d: event %d drawn at x=%.1f, want %.1f", i, k+1, got, want)
			}
		}
		if !strings.Contains(c[1], "<polyline") {
			t.Errorf("chart %d has no latency line", i)
		}
		bars := barRE.FindAllStringSubmatch(c[1], -1)
		if len(bars) != 20 {
			t.Errorf("chart %d: %d rate bars, want 20", i, len(bars))
		}
		// The hole: the baseline arm's buckets 5, 6 (timeouts) and 12, 13
		// (failures) have no answered bar; the other arm's all do.
		for k, bar := range bars {
			h, _ := strconv.ParseFloat(bar[3], 64)
			empty := i == 0 && (k == 5 || k == 6 || k == 12 || k == 13)
			if empty != (h == 0) {
				t.Errorf("chart %d bucket %d: answered bar %.1f px high", i, k, h)
			}
		}
	}
	if i := strings.Index(dom, `id="answer"`); i < 0 || i > strings.Index(dom, "<svg") {
		t.Error("the comparisons do not lead the page")
	}
	// Two events a side cannot reach p < 0.05: the page says undecided
	// and why, rather than a verdict the data cannot carry.
	if !strings.Contains(dom, "longest_gap_ms") || !strings.Contains(dom, `class="v-undecided"`) || !strings.Contains(dom, "cannot reach") {
		t.Error("the comparison of the gaps (undecided on 2 events a side, with its reason) is not on the page")
	}
}
