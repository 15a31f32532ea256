package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cnibench/cnibench/pkg/result"
)

// fakeProc is a /proc fixture: self's network namespace is "node"; a
// process in the same namespace gets a net link to self's net directory
// (so its net/dev is the same inode), one in another namespace its own.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) *fakeProc {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "self", "net"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "self", "net", "dev"), []byte("node\n"), 0o644))
	return &fakeProc{t: t, root: root}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// add writes /proc/<pid>: comm, stat with utime and stime, and net.
func (p *fakeProc) add(pid int, comm string, utime, stime int64, sameNetns bool) {
	dir := filepath.Join(p.root, fmt.Sprint(pid))
	must(p.t, os.MkdirAll(dir, 0o755))
	must(p.t, os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644))
	// Fields 3..: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime …
	stat := fmt.Sprintf("%d (%s) S 1 1 1 0 -1 4194560 100 0 0 0 %d %d 0 0 20 0 12 0 100 0 0\n", pid, comm, utime, stime)
	must(p.t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
	if sameNetns {
		must(p.t, os.Symlink(filepath.Join(p.root, "self", "net"), filepath.Join(dir, "net")))
	} else {
		must(p.t, os.MkdirAll(filepath.Join(dir, "net"), 0o755))
		must(p.t, os.WriteFile(filepath.Join(dir, "net", "dev"), []byte("other\n"), 0o644))
	}
}

func TestAgentReaderTakesOnlyTheNodesAgents(t *testing.T) {
	p := newFakeProc(t)
	p.add(10, "kube-proxy", 120, 30, true)
	p.add(11, "flanneld", 7, 3, false) // another node's (k8slab: nodes are netns of one kernel)
	p.add(12, "systemd", 500, 500, true)
	p.add(13, "ovs-vswitchd", 1000, 2000, false) // the host's
	p.add(14, "flanneld", 40, 2, true)
	a, err := NewAgentReader(p.root)
	if err != nil {
		t.Fatal(err)
	}
	// 50 s since boot at Unix 100 s; the fake processes started 1 s
	// (100 ticks) after boot.
	a.Boot = func() time.Duration { return 50 * time.Second }
	s := a.Sample(time.Unix(100, 0))
	want := []AgentProc{{10, "kube-proxy", 150, 51e9}, {14, "flanneld", 42, 51e9}}
	if fmt.Sprint(s.Procs) != fmt.Sprint(want) || s.T != 100e9 {
		t.Errorf("sample %+v, want %+v", s, want)
	}
	// The probe uses the same rule.
	if got := agentNames(nodeAgents(p.root)); strings.Join(got, ",") != "flanneld,kube-proxy" {
		t.Errorf("nodeAgents %v", got)
	}
	// An agent that exits is dropped, and the next sample rescans.
	must(t, os.RemoveAll(filepath.Join(p.root, "14")))
	if s := a.Sample(time.Unix(100, 1)); len(s.Procs) != 1 || s.Procs[0].PID != 10 {
		t.Errorf("after flanneld exited: %+v", s.Procs)
	}
	// Its successor starts after the rescan that followed: it is found
	// at the next sample still, not at the next periodic rescan.
	if s := a.Sample(time.Unix(100, 2)); len(s.Procs) != 1 {
		t.Errorf("flanneld back before it was started: %+v", s.Procs)
	}
	p.add(15, "flanneld", 1, 0, true)
	if s := a.Sample(time.Unix(100, 3)); len(s.Procs) != 2 || s.Procs[1].PID != 15 {
		t.Errorf("restarted flanneld not found: %+v", s.Procs)
	}

	// Without its own netns, the meter cannot tell nodes apart: an error.
	bare := t.TempDir()
	if _, err := NewAgentReader(bare); err == nil || !strings.Contains(err.Error(), "network namespace") {
		t.Errorf("no netns: %v", err)
	}
}

func TestProcTicksParsesOddNames(t *testing.T) {
	p := newFakeProc(t)
	p.add(20, "a) b (c", 5, 6, true)
	if v, start, err := procTicks(p.root, 20); err != nil || v != 11 || start != 100 {
		t.Errorf("ticks %d, start %d, %v", v, start, err)
	}
	must(t, os.WriteFile(filepath.Join(p.root, "20", "stat"), []byte("20 (x) S 1"), 0o644))
	if _, _, err := procTicks(p.root, 20); err == nil {
		t.Error("short stat accepted")
	}
}

func TestRunAgentMeterPrintsParsableLines(t *testing.T) {
	p := newFakeProc(t)
	p.add(10, "kube-proxy", 1, 1, true)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Millisecond)
	defer cancel()
	var b bytes.Buffer
	if err := RunAgentMeter(ctx, &b, p.root, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ss := ParseAgentLog(append(b.Bytes(), []byte("torn {\n{\"t\":")...))
	if len(ss) < 2 || ss[0].Procs[0].Ticks != 2 || ss[0].T >= ss[len(ss)-1].T {
		t.Errorf("parsed %+v from %q", ss, b.String())
	}
}

// series is a meter log: every step from t0 for n samples, each process
// gaining perStep ticks per sample.
func series(t0 time.Time, step time.Duration, n int, procs map[int]string, perStep map[int]int64) []AgentSample {
	var out []AgentSample
	for i := 0; i < n; i++ {
		s := AgentSample{T: t0.Add(time.Duration(i) * step).UnixNano()}
		for pid, name := range procs {
			s.Procs = append(s.Procs, AgentProc{PID: pid, Name: name, Ticks: 1000 + int64(i)*perStep[pid]})
		}
		out = append(out, s)
	}
	return out
}

func near(a *float64, b float64) bool { return a != nil && math.Abs(*a-b) < 1e-9 }

func TestAgentWindowInterpolates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// kube-proxy: 2 ticks per 200 ms sample = 10 % of a CPU; flanneld 1.
	ss := series(t0, 200*time.Millisecond, 40, map[int]string{7: "kube-proxy", 8: "flanneld"}, map[int]int64{7: 2, 8: 1})
	// A window that starts and ends between samples.
	acs, err := AgentWindow("n1", ss, t0.Add(1100*time.Millisecond), t0.Add(6100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(acs) != 2 || acs[0].Process != "flanneld" || acs[1].Process != "kube-proxy" {
		t.Fatalf("agents %+v", acs)
	}
	if !near(acs[1].Seconds, 0.5) || !near(acs[1].Pct, 10) || !near(acs[0].Seconds, 0.25) || acs[1].Node != "n1" || acs[1].PIDs[0] != 7 {
		t.Errorf("kube-proxy %+v flanneld %+v: want 0.5 s (10 %%) and 0.25 s", acs[1], acs[0])
	}
	// Samples that do not reach the window's end: an error naming both.
	if _, err := AgentWindow("n1", ss, t0.Add(7*time.Second), t0.Add(20*time.Second)); err == nil || !strings.Contains(err.Error(), "do not cover") {
		t.Errorf("uncovered window: %v", err)
	}
	// flanneld restarts in the window: its figure is missing, with why.
	for i := range ss {
		if ss[i].T > t0.Add(3*time.Second).UnixNano() {
			for j := range ss[i].Procs {
				if ss[i].Procs[j].PID == 8 {
					ss[i].Procs[j].PID = 9
				}
			}
		}
	}
	acs, _ = AgentWindow("n1", ss, t0.Add(1100*time.Millisecond), t0.Add(6100*time.Millisecond))
	if acs[0].Seconds != nil || !strings.Contains(acs[0].Missing, "started or ended during the window") || !near(acs[1].Seconds, 0.5) {
		t.Errorf("restart: %+v", acs)
	}
}

func windowResult(start time.Time) *result.Result {
	r := result.New(result.Tool{Name: "cnibench"}, result.TCPLat, 1)
	r.Start, r.DurationSeconds = start, 5
	r.Transactions = &result.Transactions{Count: 50000}
	return r
}

func TestFoldAgentCPU(t *testing.T) {
	t0 := time.Unix(1000, 0)
	logs := map[string][]AgentSample{
		"n1": series(t0, 200*time.Millisecond, 60, map[int]string{7: "kube-proxy"}, map[int]int64{7: 2}),
		"n2": series(t0, 200*time.Millisecond, 60, map[int]string{5: "kube-proxy", 6: "flanneld"}, map[int]int64{5: 1, 6: 1}),
	}
	r := windowResult(t0.Add(2 * time.Second))
	FoldAgentCPU(r, []string{"n1", "n2"}, logs, nil)
	d := r.CPU.Datapath
	// 0.5 + 0.25 + 0.25 s over 5 s; 1 s / 50,000 transactions = 20 µs each.
	if d == nil || !near(d.Seconds, 1) || !near(d.Pct, 20) || !near(d.UsPerTransaction, 20) || len(d.Agents) != 3 ||
		d.Process != "agents: flanneld, kube-proxy on n1, n2" {
		t.Fatalf("datapath %+v", d)
	}
	if v, ok := result.Metrics["datapath_cpu_pct"].Get(r); !ok || v != 20 {
		t.Errorf("the report's datapath CPU metric reads %v %v", v, ok)
	}
	if r.Missing["cpu.datapath.pmd_busy_pct"] == "" || r.Missing["cpu.datapath.seconds_per_gb"] == "" {
		t.Errorf("missing %v", r.Missing)
	}

	// A node without agents adds nothing and is no failure.
	r = windowResult(t0.Add(2 * time.Second))
	FoldAgentCPU(r, []string{"n1", "n2"}, logs, map[string]string{"n2": noAgents})
	if d := r.CPU.Datapath; !near(d.Seconds, 0.5) || len(d.Agents) != 1 {
		t.Errorf("n2 without agents: %+v", d)
	}
	// A node whose meter failed: no total (it would be too low), the reason.
	r = windowResult(t0.Add(2 * time.Second))
	FoldAgentCPU(r, []string{"n1", "n2"}, logs, map[string]string{"n2": "node n2: agent meter pod x: Forbidden"})
	if d := r.CPU.Datapath; d.Seconds != nil || d.Pct != nil || len(d.Agents) != 1 || !strings.Contains(r.Missing["cpu.datapath.pct"], "Forbidden") {
		t.Errorf("n2 failed: %+v missing %v", d, r.Missing)
	}
	if _, ok := result.Metrics["datapath_cpu_pct"].Get(r); ok {
		t.Error("a partial sum reached the report")
	}
	// No agent anywhere: cpu.datapath is missing with the reason, not 0.
	r = windowResult(t0.Add(2 * time.Second))
	FoldAgentCPU(r, []string{"n1"}, nil, map[string]string{"n1": noAgents})
	if r.CPU != nil || !strings.Contains(r.Missing["cpu.datapath"], "no datapath agent") {
		t.Errorf("no agents: %+v %v", r.CPU, r.Missing)
	}
	// A result without a window (a failed driver) gets the reason too.
	r = result.New(result.Tool{Name: "cnibench"}, result.TCPLat, 1)
	FoldAgentCPU(r, []string{"n1"}, logs, nil)
	if r.CPU != nil || r.Missing["cpu.datapath"] == "" {
		t.Errorf("no window: %+v", r.Missing)
	}
}

func TestMeasuredWindowOfDrivers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := windowResult(t0)
	r.WarmupSeconds = 1
	if s, e, _ := measuredWindow(r); !s.Equal(t0) || !e.Equal(t0.Add(5*time.Second)) {
		t.Errorf("builtin: %v %v", s, e)
	}
	r.Tool.Name = "qperf" // stamps the tool's start: the window begins a warmup later
	if s, e, _ := measuredWindow(r); !s.Equal(t0.Add(time.Second)) || !e.Equal(t0.Add(6*time.Second)) {
		t.Errorf("driver: %v %v", s, e)
	}
}

func TestExecuteWithAgentCPU(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	// Each client pod's results: a window of 5 s from t0+10 s.
	fc.logs = func(pod *corev1.Pod, _ string) ([]byte, error) {
		set := result.Set{Schema: result.SetSchemaVersion}
		r := windowResult(t0.Add(10 * time.Second))
		r.Latency = &result.Latency{OneWayNs: result.Dist{Count: 10, Mean: result.F(12000)}}
		set.Results = append(set.Results, r)
		return json.Marshal(set)
	}
	// n1's kube-proxy runs at 10 % of a CPU, n2's at 5 %.
	fc.meter = func(pod *corev1.Pod) []byte {
		per := map[string]int64{"n1": 2, "n2": 1}[pinnedNode(pod)]
		var b bytes.Buffer
		for _, s := range series(t0, 200*time.Millisecond, 150, map[int]string{42: "kube-proxy"}, map[int]int64{42: per}) {
			json.NewEncoder(&b).Encode(s)
		}
		return b.Bytes()
	}
	o := testOptions()
	o.Scenarios = []string{ScenarioSameNode, ScenarioCrossNode}
	o.Repeats = 1
	o.AgentCPU = true
	r, plan := fc.prepare(t, o)
	got := map[string]*result.DatapathCPU{}
	if err := r.Execute(context.Background(), plan, o, func(s Sample) error {
		got[s.Scenario] = s.Results[0].CPU.Datapath
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Same node: n1's agents only; across: n1's and n2's.
	if d := got[ScenarioSameNode]; d == nil || !near(d.Pct, 10) || len(d.Agents) != 1 {
		t.Errorf("same node: %+v", d)
	}
	if d := got[ScenarioCrossNode]; d == nil || !near(d.Pct, 15) || len(d.Agents) != 2 {
		t.Errorf("cross node: %+v", d)
	}
	var meters []*corev1.Pod
	for _, p := range fc.createdPods() {
		if p.Labels[LabelRole] == "meter" {
			meters = append(meters, p)
		}
	}
	if len(meters) != 2 {
		t.Fatalf("%d meter pods, want one per node", len(meters))
	}
	m := meters[0]
	sc := m.Spec.Containers[0].SecurityContext
	if !m.Spec.HostPID || !m.Spec.HostNetwork || *sc.RunAsUser != nonRootUID || sc.Capabilities.Add != nil || !*sc.ReadOnlyRootFilesystem ||
		m.Spec.Containers[0].Args[1] != "agent-cpu" || m.Spec.ActiveDeadlineSeconds == nil || len(m.Spec.Tolerations) != 1 {
		t.Errorf("meter pod %+v", m.Spec)
	}
	fc.wantClean(t)

	// Without --agent-cpu no meter runs and nothing is added.
	fc2 := newFakeCluster(t, "n1")
	o.AgentCPU = false
	o.Scenarios = []string{ScenarioSameNode}
	plan, _ = fc2.runner().Prepare(context.Background(), o)
	if err := fc2.runner().Execute(context.Background(), plan, o, func(s Sample) error {
		if s.Results[0].CPU != nil && s.Results[0].CPU.Datapath != nil {
			t.Error("datapath CPU without --agent-cpu")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range fc2.createdPods() {
		if p.Labels[LabelRole] == "meter" {
			t.Error("meter pod without --agent-cpu")
		}
	}
}

func TestAgentCPUNodeWithoutAgentsGetsNoMeter(t *testing.T) {
	fc := newFakeCluster(t, "n1")
	fc.probe = &NodeProbe{KubeProxyMode: "ipvs", Agents: []string{}}
	o := testOptions()
	o.Scenarios, o.Repeats, o.AgentCPU = []string{ScenarioSameNode}, 1, true
	fc.logs = func(pod *corev1.Pod, _ string) ([]byte, error) {
		set := result.Set{Schema: result.SetSchemaVersion, Results: []*result.Result{windowResult(time.Now())}}
		return json.Marshal(set)
	}
	r, plan := fc.prepare(t, o)
	var got *result.Result
	if err := r.Execute(context.Background(), plan, o, func(s Sample) error { got = s.Results[0]; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, p := range fc.createdPods() {
		if p.Labels[LabelRole] == "meter" {
			t.Error("meter pod on a node without agents")
		}
	}
	if (got.CPU != nil && got.CPU.Datapath != nil) || !strings.Contains(got.Missing["cpu.datapath"], "no datapath agent") {
		t.Errorf("no agents: %+v", got.Missing)
	}
}

// TestStartedCPU: only the processes that started within the window
// count, from their start; one that ran before it (or ended in it) does
// not; a start after the last sample before the end is interpolated from
// the start's zero.
func TestStartedCPU(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) int64 { return t0.Add(time.Duration(ms) * time.Millisecond).UnixNano() }
	var ss []AgentSample
	for ms := 0; ms <= 2000; ms += 200 {
		s := AgentSample{T: at(ms)}
		if ms <= 600 { // the old agent, there since before the window, killed at 700 ms
			s.Procs = append(s.Procs, AgentProc{PID: 7, Name: "kube-proxy", Ticks: 5000 + int64(ms), Start: at(-60000)})
		}
		if ms >= 1000 { // the new one started at 900 ms: 1 tick per 20 ms
			s.Procs = append(s.Procs, AgentProc{PID: 8, Name: "kube-proxy", Ticks: int64(ms-900) / 20, Start: at(900)})
		}
		ss = append(ss, s)
	}
	d, pids, err := StartedCPU("b", ss, t0.Add(500*time.Millisecond), t0.Add(1500*time.Millisecond))
	if err != nil || fmt.Sprint(pids) != "[8]" || d != 300*time.Millisecond {
		t.Errorf("restart window: %v %v %v, want 300ms from pid 8 (30 ticks)", d, pids, err)
	}
	// The end before the new process's first sample: from its start's zero.
	d, _, err = StartedCPU("b", ss, t0.Add(500*time.Millisecond), t0.Add(950*time.Millisecond))
	if err != nil || d != 25*time.Millisecond {
		t.Errorf("end before the first sample: %v %v, want 25ms (5 ticks at 1000 ms, half of it)", d, err)
	}
	// Found by the meter only two samples after the end (a rescan
	// late): still counted, from its start's zero.
	late := append([]AgentSample(nil), ss...)
	for i := range late {
		if late[i].T < at(1400) {
			late[i] = AgentSample{T: late[i].T, Procs: slices.DeleteFunc(slices.Clone(late[i].Procs), func(p AgentProc) bool { return p.PID == 8 })}
		}
	}
	if d, pids, err := StartedCPU("b", late, t0.Add(500*time.Millisecond), t0.Add(1100*time.Millisecond)); err != nil || fmt.Sprint(pids) != "[8]" || d != 100*time.Millisecond {
		t.Errorf("found late: %v %v %v, want 100ms (25 ticks at 1400 ms, 200 of its 500 ms)", d, pids, err)
	}
	// A window with no start: nothing, no error.
	if d, pids, err := StartedCPU("b", ss, t0, t0.Add(400*time.Millisecond)); err != nil || d != 0 || pids != nil {
		t.Errorf("no start: %v %v %v", d, pids, err)
	}
}
