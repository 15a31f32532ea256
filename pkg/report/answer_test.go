package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// Every page format leads with the answer: one line per comparison, after
// the run's own line and before the hosts, the arms and the tables.
func TestAnswerLeads(t *testing.T) {
	run, ss := kubeOVNRun()
	wantLines := []string{
		"overlay vs host: tcp_lat 1B faster 8.4% (p=0.0079);",
		"underlay vs host: tcp_lat 1B faster 13.9% (p=0.0079);",
		"tcp_bw 1B equivalent within ±5%",
	}
	for _, f := range []string{FormatTable, FormatMarkdown, FormatHTML} {
		page := string(render(t, f, Input{run, ss}))
		flat := unwrap(strings.NewReplacer("<b>", "", "</b>", "", `<span class="v-better">`, "", `<span class="v-worse">`, "",
			`<span class="v-equivalent">`, "", "</span>", "").Replace(page))
		for _, w := range wantLines {
			if !strings.Contains(flat, w) {
				t.Errorf("%s: the answer lacks %q:\n%s", f, w, page)
			}
		}
		answer := strings.Index(page, "overlay vs host")
		for _, later := range []string{"host lab1 ·", "topology vxlan", "tcp_lat 1B (µs)"} {
			if i := strings.Index(page, later); answer < 0 || i < answer {
				t.Errorf("%s: %q comes before the answer", f, later)
			}
		}
	}
	// compare: one answer per arm, B against A.
	c1, s1 := ciliumRun(3, ubuntu20, 1)
	c2, s2 := ciliumRun(4, opensuse15, 1.12)
	rows, _, _ := Comparison(c1, s1, c2, s2)
	as := compareAnswers(rows)
	if len(as) != 3 || as[0].Subject != "native" || !strings.HasPrefix(as[0].String(), "native: bitrate (sender) faster 12.0% (p=0.0079);") {
		t.Errorf("compare answers %q", as)
	}
	if !strings.Contains(as[2].String(), "CPU (receiver) no value: A: the server ran in a pod") {
		t.Errorf("geneve's missing CPU: %q", as[2].String())
	}
}

// hostRun is a run whose every sample records the same conditions and the
// host's idle wake-up penalty, as `cnibench run` stores them.
func hostRun(wake *result.IdleWakeup, policy func(arm string) string) (*store.Run, []store.Sample) {
	run := &store.Run{ID: 9, Name: "idle", Kind: store.KindLab, Baseline: "host", Complete: true, Started: t0, Finished: t0, Host: ubuntu20,
		Arms: []store.Arm{{Name: "host", Topology: "host", Engine: "builtin"}, {Name: "vxlan", Topology: "vxlan", Engine: "builtin"}}}
	var ss []store.Sample
	for rep := 0; rep < 5; rep++ {
		for _, arm := range []string{"host", "vxlan"} {
			us := map[string]float64{"host": 5, "vxlan": 6.7}[arm] * (1 + jitter[rep])
			r := latResult(result.TCPLat, 1, us, 0, "cnibench")
			r.Conditions = &result.Conditions{Wakeup: policy(arm), WakeupWhy: "a sentence the calibration wrote", IdleWakeup: wake}
			ss = append(ss, store.Sample{RunID: 9, Seq: len(ss), Arm: arm, Engine: "builtin", Test: result.TCPLat, MsgSize: 1, Repeat: rep, Result: r})
		}
	}
	return run, ss
}

// The idle wake-up penalty is a property of the host: printed once in the
// header, not per arm, in every format (and in JSON); how the arms were
// measured is said once when it is the same for all of them.
func TestHeaderIdleWakeupAndConditions(t *testing.T) {
	hold := func(string) string { return "hold" }
	run, ss := hostRun(&result.IdleWakeup{Arm: "host", Rounds: 3, NoneUs: 5.1, HoldUs: 3.8, PenaltyUs: 1.3}, hold)
	line := "idle wake-up penalty: 1.30 µs one way (tcp_lat 1B on host: 5.10 µs with idle CPUs free to halt, 3.80 µs held awake; medians of 3 rounds)"
	for _, f := range []string{FormatTable, FormatMarkdown, FormatHTML} {
		page := unwrap(string(render(t, f, Input{run, ss})))
		if n := strings.Count(page, line); n != 1 {
			t.Errorf("%s: the penalty %d times, want once:\n%s", f, n, page)
		}
		if n := strings.Count(page, "a sentence the calibration wrote"); n != 1 {
			t.Errorf("%s: the arms' common conditions %d times, want once", f, n)
		}
		if !strings.Contains(page, "every arm: wake-up hold") {
			t.Errorf("%s: no conditions line", f)
		}
	}
	var doc JSONReport
	if err := json.Unmarshal(render(t, FormatJSON, Input{run, ss}), &doc); err != nil || doc.Runs[0].IdleWakeup == nil || doc.Runs[0].IdleWakeup.PenaltyUs != 1.3 {
		t.Errorf("JSON idle_wakeup: %v %+v", err, doc.Runs[0].IdleWakeup)
	}

	// Not measured: the reason, once.
	run, ss = hostRun(&result.IdleWakeup{Arm: "host", Missing: "the baseline arm's path failed: connection refused"}, hold)
	if page := unwrap(string(render(t, FormatTable, Input{run, ss}))); strings.Count(page,
		"idle wake-up penalty: not measured (the baseline arm's path failed: connection refused)") != 1 {
		t.Errorf("missing penalty:\n%s", page)
	}
	// Arms measured differently keep their own conditions; an older run
	// without the penalty has no such line.
	run, ss = hostRun(nil, func(arm string) string { return map[string]string{"host": "hold", "vxlan": "none"}[arm] })
	page := unwrap(string(render(t, FormatTable, Input{run, ss})))
	if strings.Contains(page, "every arm") || strings.Contains(page, "idle wake-up penalty") ||
		!strings.Contains(page, "arm vxlan: topology vxlan, engine builtin; wake-up none") {
		t.Errorf("different conditions:\n%s", page)
	}
}
