package report

import (
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

func latSample(seq int, arm string, us float64, c *result.Conditions) store.Sample {
	r := result.New(result.Tool{Name: "cnibench"}, result.TCPLat, 1)
	r.Latency = &result.Latency{OneWayNs: result.Dist{Count: 1000, Mean: result.F(us * 1000)}}
	r.Conditions = c
	return store.Sample{Seq: seq, Arm: arm, Engine: "builtin", Test: result.TCPLat, MsgSize: 1, Result: r}
}

// A retaken sample leaves the statistics but not the report; disturbed
// samples and wake-up dominated cells are flagged and explained.
func TestConditionsInReport(t *testing.T) {
	wake := 6.0
	quiet := func() *result.Conditions {
		return &result.Conditions{Wakeup: "none", IdleWakeupUs: &wake, Disturbance: &result.Disturbance{}}
	}
	spun := func() *result.Conditions {
		return &result.Conditions{Wakeup: "spin", IdleWakeupUs: &wake, Disturbance: &result.Disturbance{}}
	}
	bad := quiet()
	bad.Disturbance = &result.Disturbance{OthersCPUPct: 80, Busiest: "cc1", Disturbed: true, Why: []string{"other processes 80% CPU (most: cc1)"}}
	retake := quiet()
	orig := 2
	retake.RetakeOf = &orig
	one := 1
	pinned := spun()
	pinned.ClientCPU = &one
	ss := []store.Sample{
		latSample(0, "plain", 10, quiet()), latSample(1, "plain", 11, quiet()), latSample(2, "plain", 99, bad),
		latSample(3, "spun", 7, pinned), latSample(4, "spun", 7.5, pinned), latSample(5, "spun", 7.2, pinned),
		latSample(6, "plain", 10.5, retake),
	}
	run := &store.Run{ID: 1, Name: "r", Kind: "lab", Complete: true, Arms: []store.Arm{{Name: "plain", Topology: "veth"}, {Name: "spun", Topology: "veth"}}}
	m := Analyze(run, ss)
	c := m.Cell("plain", result.TCPLat, 1, primary(result.TCPLat).Name)
	if c.Summary.N != 3 || c.Summary.Max > 20 {
		t.Errorf("plain used %d samples (max %v): the retaken one must be left out", c.Summary.N, c.Summary.Max)
	}
	if strings.Join(c.Flags, ",") != "wakeup" {
		t.Errorf("plain flags %v: 6 µs of wake-up in 10.5 µs is dominated", c.Flags)
	}
	if s := m.Cell("spun", result.TCPLat, 1, primary(result.TCPLat).Name); len(s.Flags) != 0 {
		t.Errorf("spun flags %v: a policy was in force", s.Flags)
	}
	if got := m.ArmConditions["spun"]; got != "wake-up spin, CPUs client=1" {
		t.Errorf("arm conditions %q", got)
	}
	var notes []string
	for _, f := range m.Flags {
		notes = append(notes, f.Code+": "+f.Message)
	}
	all := strings.Join(notes, "\n")
	for _, want := range []string{"retaken: 1 disturbed samples were measured again", "#2 plain tcp_lat 1B", "wakeup: 1 table cell", "6.0 µs"} {
		if !strings.Contains(all, want) {
			t.Errorf("notes lack %q:\n%s", want, all)
		}
	}
	// The same original without its retake counts as disturbed.
	m = Analyze(run, ss[:6])
	c = m.Cell("plain", result.TCPLat, 1, primary(result.TCPLat).Name)
	if !contains(c.Flags, "1 disturbed") {
		t.Errorf("flags %v: want 1 disturbed", c.Flags)
	}
	var text strings.Builder
	if err := Render(&text, "table", run, ss[:6]); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range m.Flags {
		found = found || (f.Code == "disturbed" && strings.Contains(f.Message, "busiest other processes: cc1"))
	}
	if !found {
		t.Errorf("no disturbed note naming cc1: %+v", m.Flags)
	}
	for _, want := range []string{"1 disturbed, wakeup]", "[N disturbed]: N samples taken", "wake-up none, CPUs not pinned"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, text.String())
		}
	}
}

// A precision-driven run's report says per cell how many samples it took
// and whether the interval reached the target.
func TestPrecisionFlags(t *testing.T) {
	var ss []store.Sample
	for i, v := range []float64{10, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98} {
		ss = append(ss, latSample(i, "tight", v, nil))
	}
	for i, v := range []float64{10, 14, 7, 12, 9, 15} {
		ss = append(ss, latSample(10+i, "wide", v, nil))
	}
	run := &store.Run{ID: 1, Name: "p", Kind: "lab", Complete: true,
		Labels: map[string]string{"precision": "5%", "budget": "4m30s"},
		Arms:   []store.Arm{{Name: "tight", Topology: "veth"}, {Name: "wide", Topology: "veth"}}}
	m := Analyze(run, ss)
	tight := m.Cell("tight", result.TCPLat, 1, primary(result.TCPLat).Name)
	wide := m.Cell("wide", result.TCPLat, 1, primary(result.TCPLat).Name)
	if !contains(tight.Flags, "n=7") || !contains(wide.Flags, "n=6 >±5%") {
		t.Errorf("flags: tight %v, wide %v", tight.Flags, wide.Flags)
	}
	found := false
	for _, f := range m.Flags {
		if f.Code == "precision" && strings.Contains(f.Message, "1 of 2 table cells reached it; not reached: wide tcp_lat 1B") {
			found = true
		}
	}
	if !found {
		t.Errorf("no precision note: %+v", m.Flags)
	}
	// Without the label nothing is added.
	run.Labels = nil
	if c := Analyze(run, ss).Cell("tight", result.TCPLat, 1, primary(result.TCPLat).Name); contains(c.Flags, "n=7") {
		t.Errorf("a fixed-repeat run got precision flags: %v", c.Flags)
	}
}

// An arm measured under auto says "auto" once, whichever way the reason
// was stored (pkg/wakeup's "auto: …", or older results' without it).
func TestArmConditionsAutoOnce(t *testing.T) {
	cpu0, cpu1 := 0, 1
	c := func(w, why string) *result.Conditions {
		return &result.Conditions{Wakeup: w, WakeupWhy: why, ClientCPU: &cpu0, ServerCPU: &cpu1}
	}
	ss := []store.Sample{
		latSample(0, "a", 5, c("hold", "auto: hold for request/response tests")),
		latSample(1, "a", 5, c("none", "auto: none for stream tests")),
		latSample(2, "b", 5, c("none", "cross-CPU wake-up one way: none 2.8 µs, hold 2.9 µs")),
	}
	got := ArmConditions(ss)
	if want := "wake-up hold; none (auto: hold for request/response tests; none for stream tests), CPUs client=0,server=1"; got["a"] != want {
		t.Errorf("a: %q\nwant %q", got["a"], want)
	}
	if want := "wake-up none (auto: cross-CPU wake-up one way: none 2.8 µs, hold 2.9 µs), CPUs client=0,server=1"; got["b"] != want {
		t.Errorf("b: %q\nwant %q", got["b"], want)
	}
}
