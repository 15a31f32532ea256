package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// modesRun is the tcp_lat cell: veth's samples at 2.3 µs when
// client and server ran on one CPU and at 5.0 µs when they ran on two,
// interleaved through the run; host's samples one mode. withRanOn false
// drops where the threads ran, as an engine that does not record it.
func modesRun(withRanOn bool) (*store.Run, []store.Sample) {
	run := &store.Run{ID: 5, Name: "modes", Kind: store.KindLab, Baseline: "host", Complete: true,
		Started: t0, Finished: t0.Add(time.Minute), Host: ubuntu20,
		Arms: []store.Arm{{Name: "host", Topology: "host", Engine: "builtin"}, {Name: "veth", Topology: "veth", Engine: "builtin"}}}
	slowAt := map[int]bool{1: true, 4: true, 6: true, 8: true}
	var ss []store.Sample
	for rep := 0; rep < 10; rep++ {
		for _, arm := range []string{"host", "veth"} {
			us, server := 2.2*(1+jitter[rep%5]), 0
			if arm == "veth" {
				us = 2.3 * (1 + jitter[rep%5])
				if slowAt[rep] {
					us, server = 5.0*(1+jitter[(rep+2)%5]), 1
				}
			}
			r := latResult(result.TCPLat, 1, us, 0, "cnibench")
			r.Conditions = &result.Conditions{Wakeup: "hold"}
			if withRanOn {
				r.CPU.Client.RanOn = []result.CPUShare{{CPU: 0, Pct: 100}}
				r.CPU.Server.RanOn = []result.CPUShare{{CPU: server, Pct: 97}, {CPU: 1 - server, Pct: 3}}
			}
			ss = append(ss, store.Sample{RunID: run.ID, Seq: len(ss), Arm: arm, Engine: "builtin", Test: result.TCPLat, MsgSize: 1, Repeat: rep, Result: r})
		}
	}
	return run, ss
}

// A two-mode cell shows both modes and what separated them, in every
// format; a one-mode cell is left alone.
func TestTwoModeCell(t *testing.T) {
	run, ss := modesRun(true)
	m := Analyze(run, ss)
	host, veth := m.Cell("host", result.TCPLat, 1, mOneWay.Name), m.Cell("veth", result.TCPLat, 1, mOneWay.Name)
	if host.Modes != nil || contains(host.Flags, FlagModes) {
		t.Errorf("host's one mode flagged: %+v", host.Modes)
	}
	if veth.Modes == nil || !contains(veth.Flags, FlagModes) {
		t.Fatalf("veth's 2.3/5.0 µs not found: flags %v", veth.Flags)
	}
	if veth.Modes.Low.N != 6 || veth.Modes.High.N != 4 {
		t.Errorf("modes %+v", veth.Modes)
	}
	sep := veth.Modes.Separated
	if sep == nil || sep.Condition != "where client and server ran" || sep.Low != "on one CPU (6 of 6)" || sep.High != "on two CPUs (4 of 4)" {
		t.Fatalf("separated by %+v", sep)
	}
	txt := string(render(t, FormatTable, Input{run, ss}))
	for _, want := range []string{"2.30 (n=6) / 5.01 (n=4)", "2 modes",
		"veth tcp_lat 1B: two modes, 2.30 µs (6 samples) and 5.01 µs (4); where client and server ran separates them: on one CPU (6 of 6) in the 2.30 µs samples, on two CPUs (4 of 4) in the 5.01 µs ones"} {
		if !strings.Contains(unwrap(txt), want) {
			t.Errorf("text lacks %q:\n%s", want, txt)
		}
	}
	var doc JSONReport
	if err := json.Unmarshal(render(t, FormatJSON, Input{run, ss}), &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range doc.Runs[0].Cells {
		if c.Arm == "veth" && c.Metric == mOneWay.Name {
			if c.Modes == nil || c.Modes.SeparatedBy == nil || c.Modes.SeparatedBy.Condition != "where client and server ran" || c.Modes.Low.N != 6 {
				t.Errorf("JSON modes %+v", c.Modes)
			}
		}
		if c.Arm == "host" && c.Modes != nil {
			t.Errorf("JSON host modes %+v", c.Modes)
		}
	}
	var md bytes.Buffer
	md.Write(render(t, FormatMarkdown, Input{run, ss}))
	if !strings.Contains(md.String(), "2.30 (n=6) / 5.01 (n=4) [2 modes, noisy][^1]") {
		t.Errorf("markdown lacks the modes with their note:\n%s", md.String())
	}
}

// Samples that do not record where their threads ran: the modes are still
// shown, and the note says nothing recorded separates them and what was
// not recorded.
func TestTwoModeCellWithoutRanOn(t *testing.T) {
	run, ss := modesRun(false)
	veth := Analyze(run, ss).Cell("veth", result.TCPLat, 1, mOneWay.Name)
	if veth.Modes == nil || veth.Modes.Separated != nil {
		t.Fatalf("modes %+v", veth.Modes)
	}
	txt := unwrap(string(render(t, FormatTable, Input{run, ss})))
	if !strings.Contains(txt, "nothing recorded with the samples separates them (compared: position in the run)") ||
		!strings.Contains(txt, "not recorded: where each side's threads ran (cpu.*.ran_on)") {
		t.Errorf("text:\n%s", txt)
	}
}

// unwrap joins a terminal page's wrapped lines, so a test can look for a
// sentence wherever the wrapping broke it.
func unwrap(s string) string { return strings.Join(strings.Fields(s), " ") }
