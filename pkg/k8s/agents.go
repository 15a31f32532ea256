package k8s

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
)

// What a node's datapath agents (flanneld, kube-proxy, ovs-vswitchd, …;
// see Agents) cost while a client measures is read on the node by an
// agent meter pod (`cnibench k8s agent-cpu`, with --agent-cpu): with
// hostPID, to see the agents, and on the host network, to tell the node's
// agents from those of other network namespaces that share the kernel (on
// k8slab every node is a network namespace of one machine, so a node's
// hostPID view holds every node's kube-proxy). It runs as nobody with no
// capabilities: /proc/<pid>/comm, /proc/<pid>/stat and the entries under
// /proc/<pid>/net are world-readable. Every AgentInterval it prints one
// JSON line: the time and each agent process's user+system CPU ticks. The
// runner cuts each measured window out of that series (linear between the
// two samples around each edge), so the meter needs no signal from the
// client, and a node's figure covers exactly the client's window.

// AgentInterval is how often the meter samples: the edges of a window are
// interpolated between samples this far apart.
const AgentInterval = 200 * time.Millisecond

// UserHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which the kernel ABI fixes at 100 on every architecture Kubernetes
// runs on. It is also the resolution of the agents' CPU figures: 10 ms.
const UserHZ = 100

// AgentProc is one agent process's CPU at one instant.
type AgentProc struct {
	PID  int    `json:"pid"`
	Name string `json:"name"`
	// Ticks is utime+stime of the whole process (every thread, exited
	// ones included), in 1/UserHZ seconds.
	Ticks int64 `json:"ticks"`
	// Start is when the process started, Unix ns (to 1/UserHZ): a
	// restarted agent's new process is told from one that was there.
	Start int64 `json:"start,omitempty"`
}

// AgentSample is one line of the meter's output.
type AgentSample struct {
	T     int64       `json:"t"` // Unix nanoseconds, the node's clock
	Procs []AgentProc `json:"p"`
}

// agentScanEvery bounds how stale the meter's list of agent processes may
// get: a new agent is found within this time. One that replaces an agent
// that exited is found at the next sample (see Sample).
const agentScanEvery = 2 * time.Second

// AgentReader finds the datapath agents in its own network namespace under
// a /proc root and reads their CPU.
type AgentReader struct {
	Root string
	// Boot is the time since boot now (CLOCK_BOOTTIME, the clock of a
	// process's start time); a test sets its own.
	Boot func() time.Duration
	self uint64 // inode of Root/self/net/dev: the reader's network namespace
	pids map[int]string
	scan time.Time
	// lost are the agents that exited and have not been seen again, with
	// when: until they are (for agentLostFor at most, so an agent that is
	// gone for good does not keep the meter walking /proc), every sample
	// rescans, so a restarted agent's new process is sampled from its
	// first AgentInterval on.
	lost map[string]time.Time
}

// agentLostFor is how long the meter looks for an exited agent's
// successor at every sample: longer than a restart takes.
const agentLostFor = time.Minute

// ErrNoNetns: the reader cannot tell which network namespace it is in, so
// it cannot tell the node's agents from others'.
var ErrNoNetns = errors.New("cannot identify this pod's network namespace")

// NewAgentReader opens a reader on procRoot ("/proc" in the meter pod).
func NewAgentReader(procRoot string) (*AgentReader, error) {
	id, err := netnsID(procRoot, "self")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNetns, err)
	}
	return &AgentReader{Root: procRoot, Boot: sinceBoot, self: id}, nil
}

// sinceBoot is CLOCK_BOOTTIME now; 0 when unreadable (starts unknown).
func sinceBoot() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// netnsID identifies a process's network namespace without privilege: each
// namespace registers its own /proc/net entries, so the inode of
// /proc/<pid>/net/dev differs between namespaces and is equal within one
// (whereas reading /proc/<pid>/ns/net of another user's process needs
// ptrace rights).
func netnsID(root, pid string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(root, pid, "net", "dev"), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// procAgents lists the Agents (by process name) under root whose network
// namespace is netns (0 = any), pid -> full agent name.
func procAgents(root string, netns uint64) map[int]string {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	full := map[string]string{}
	for _, a := range Agents {
		full[truncate(a, 15)] = a // comm holds at most 15 bytes
	}
	out := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "comm"))
		if err != nil {
			continue
		}
		name, ok := full[strings.TrimSpace(string(b))]
		if !ok {
			continue
		}
		if netns != 0 {
			if id, err := netnsID(root, e.Name()); err != nil || id != netns {
				continue
			}
		}
		out[pid] = name
	}
	return out
}

// procTicks reads utime+stime from root/<pid>/stat, and the process's
// start in ticks since boot (0 when the line is too short to hold it). The
// command name in field 2 may hold spaces and parentheses, so fields count
// from the last ')'.
func procTicks(root string, pid int) (ticks, start int64, err error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("stat of %d: no ')' in %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	// After ')': state(3) ppid(4) … utime(14) stime(15) … starttime(22).
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("stat of %d: %d fields after the name", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("stat of %d: utime %q stime %q", pid, f[11], f[12])
	}
	if len(f) > 19 {
		start, _ = strconv.ParseInt(f[19], 10, 64)
	}
	return u + s, start, nil
}

// Sample reads every agent's CPU now. The process list is rescanned every
// agentScanEvery, and at every sample while an agent that exited has not
// been seen again.
func (a *AgentReader) Sample(now time.Time) AgentSample {
	for name, at := range a.lost {
		if now.Sub(at) > agentLostFor {
			delete(a.lost, name)
		}
	}
	if a.pids == nil || len(a.lost) > 0 || now.Sub(a.scan) >= agentScanEvery {
		a.pids, a.scan = procAgents(a.Root, a.self), now
		for _, name := range a.pids {
			delete(a.lost, name)
		}
	}
	s := AgentSample{T: now.UnixNano(), Procs: []AgentProc{}}
	boot := a.Boot()
	gone := false
	for pid, name := range a.pids {
		t, start, err := procTicks(a.Root, pid)
		if err != nil {
			gone = true
			if a.lost == nil {
				a.lost = map[string]time.Time{}
			}
			a.lost[name] = now
			continue
		}
		p := AgentProc{PID: pid, Name: name, Ticks: t}
		if boot > 0 && start > 0 {
			p.Start = now.Add(time.Duration(start)*(time.Second/UserHZ) - boot).UnixNano()
		}
		s.Procs = append(s.Procs, p)
	}
	if gone {
		a.pids = nil
	}
	sort.Slice(s.Procs, func(i, j int) bool { return s.Procs[i].PID < s.Procs[j].PID })
	return s
}

// RunAgentMeter prints one AgentSample line every interval until ctx ends.
func RunAgentMeter(ctx context.Context, w io.Writer, procRoot string, interval time.Duration) error {
	a, err := NewAgentReader(procRoot)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := enc.Encode(a.Sample(time.Now())); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ParseAgentLog reads the meter's lines, in time order; lines that are not
// samples (a warning, a torn last line) are skipped.
func ParseAgentLog(b []byte) []AgentSample {
	var out []AgentSample
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ln := sc.Bytes()
		if len(ln) == 0 || ln[0] != '{' {
			continue
		}
		var s AgentSample
		if json.Unmarshal(ln, &s) == nil && s.T > 0 {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

// ticksAt is a process's tick count at t, linear between the samples just
// before and just after t that both hold the process.
func ticksAt(ss []AgentSample, pid int, t int64) (float64, bool) {
	find := func(s AgentSample) (int64, bool) {
		for _, p := range s.Procs {
			if p.PID == pid {
				return p.Ticks, true
			}
		}
		return 0, false
	}
	i := sort.Search(len(ss), func(i int) bool { return ss[i].T >= t })
	if i < len(ss) && ss[i].T == t {
		v, ok := find(ss[i])
		return float64(v), ok
	}
	if i == 0 || i == len(ss) {
		return 0, false
	}
	a, okA := find(ss[i-1])
	b, okB := find(ss[i])
	if !okA || !okB {
		return 0, false
	}
	f := float64(t-ss[i-1].T) / float64(ss[i].T-ss[i-1].T)
	return float64(a) + f*float64(b-a), true
}

// AgentWindow is what one node's agents spent over one window: one entry
// per agent name, and why the node gave no figure at all.
func AgentWindow(node string, ss []AgentSample, start, end time.Time) ([]result.AgentCPU, error) {
	ws, we := start.UnixNano(), end.UnixNano()
	if len(ss) == 0 {
		return nil, fmt.Errorf("node %s: the agent meter printed no sample", node)
	}
	if ss[0].T > ws || ss[len(ss)-1].T < we {
		return nil, fmt.Errorf("node %s: the agent meter's samples (%s to %s) do not cover the window (%s to %s; are the nodes' clocks apart?)",
			node, clock(ss[0].T), clock(ss[len(ss)-1].T), clock(ws), clock(we))
	}
	wall := end.Sub(start).Seconds()
	// Processes seen from the last sample at or before the window's start
	// to the first at or after its end, per agent name.
	first := sort.Search(len(ss), func(i int) bool { return ss[i].T > ws }) - 1
	last := sort.Search(len(ss), func(i int) bool { return ss[i].T >= we })
	byName := map[string]map[int]bool{}
	for _, s := range ss[first : last+1] {
		for _, p := range s.Procs {
			if byName[p.Name] == nil {
				byName[p.Name] = map[int]bool{}
			}
			byName[p.Name][p.PID] = true
		}
	}
	var names []string
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := []result.AgentCPU{}
	for _, n := range names {
		ac := result.AgentCPU{Node: node, Process: n}
		var sum float64
		var lost []string
		for pid := range byName[n] {
			ac.PIDs = append(ac.PIDs, pid)
			a, okA := ticksAt(ss, pid, ws)
			b, okB := ticksAt(ss, pid, we)
			if !okA || !okB {
				lost = append(lost, strconv.Itoa(pid))
				continue
			}
			sum += b - a
		}
		sort.Ints(ac.PIDs)
		if len(lost) > 0 {
			sort.Strings(lost)
			ac.Missing = fmt.Sprintf("%s (pid %s) started or ended during the window", n, strings.Join(lost, ", "))
		} else {
			sec := sum / UserHZ
			ac.Seconds, ac.Pct = result.F(sec), result.F(100*sec/wall)
		}
		out = append(out, ac)
	}
	return out, nil
}

// StartedCPU is what the agent processes that started from start to end
// on one node spent from their start to end, and their pids: a restarted
// agent's own work to come back, as the lab counts a restarted daemon's
// (the old process's last work is not counted: it ended, and its final
// ticks went with it). A node where none started gives 0 and no pid.
func StartedCPU(node string, ss []AgentSample, start, end time.Time) (time.Duration, []int, error) {
	ws, we := start.UnixNano(), end.UnixNano()
	if len(ss) == 0 || ss[len(ss)-1].T < we {
		return 0, nil, fmt.Errorf("node %s: the agent meter's samples do not reach %s", node, clock(we))
	}
	seen := map[int]bool{}
	var sec float64
	var pids []int
	for _, s := range ss {
		if s.T < ws {
			continue
		}
		for _, p := range s.Procs {
			if seen[p.PID] || p.Start < ws || p.Start > we {
				continue
			}
			seen[p.PID] = true
			t, ok := ticksAt(ss, p.PID, we)
			if !ok {
				// Started after the last sample before end: it had
				// no ticks at its start.
				t, ok = ticksFromStart(ss, p, we)
			}
			if !ok {
				return 0, nil, fmt.Errorf("node %s: %s (pid %d) started at %s but is not sampled around %s", node, p.Name, p.PID, clock(p.Start), clock(we))
			}
			sec += t / UserHZ
			pids = append(pids, p.PID)
		}
	}
	sort.Ints(pids)
	return time.Duration(sec * float64(time.Second)), pids, nil
}

// ticksFromStart is p's ticks at t, linear between its start (no ticks)
// and the first sample after t that holds it.
func ticksFromStart(ss []AgentSample, p AgentProc, t int64) (float64, bool) {
	for _, s := range ss[sort.Search(len(ss), func(i int) bool { return ss[i].T >= t }):] {
		for _, q := range s.Procs {
			if q.PID == p.PID && s.T > p.Start {
				return float64(q.Ticks) * float64(t-p.Start) / float64(s.T-p.Start), true
			}
		}
	}
	return 0, false
}

func clock(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000") }

// measuredWindow is a result's measured interval on the client's clock.
// The built-in engine stamps Start when measuring begins; the drivers
// stamp the tool's start, so their window begins a warmup later.
func measuredWindow(r *result.Result) (time.Time, time.Time, bool) {
	if r.Start.IsZero() || r.DurationSeconds <= 0 {
		return time.Time{}, time.Time{}, false
	}
	s := r.Start
	if r.Tool.Name != "" && r.Tool.Name != "cnibench" {
		s = s.Add(time.Duration(r.WarmupSeconds * float64(time.Second)))
	}
	return s, s.Add(time.Duration(r.DurationSeconds * float64(time.Second))), true
}

// FoldAgentCPU puts the agents' CPU over r's window on the given nodes
// into r.CPU.Datapath, the field the lab fills with ovs-vswitchd's, so the
// report's "datapath CPU" column shows it beside the engine's CPU. logs
// holds each metered node's samples; skip says why a node has none. A
// figure that cannot be had is nil with the reason in r.Missing.
func FoldAgentCPU(r *result.Result, nodes []string, logs map[string][]AgentSample, skip map[string]string) {
	if r.Missing == nil {
		r.Missing = map[string]string{}
	}
	start, end, ok := measuredWindow(r)
	if !ok {
		r.Missing["cpu.datapath"] = "the result has no measured window (start and duration)"
		return
	}
	d := &result.DatapathCPU{Agents: []result.AgentCPU{}}
	var why []string
	var none []string
	total, complete := 0.0, true
	procs := map[string]bool{}
	for _, n := range nodes {
		if reason, ok := skip[n]; ok {
			if reason == noAgents {
				none = append(none, n)
				continue
			}
			why = append(why, reason)
			complete = false
			continue
		}
		acs, err := AgentWindow(n, logs[n], start, end)
		if err != nil {
			why = append(why, err.Error())
			complete = false
			continue
		}
		if len(acs) == 0 {
			none = append(none, n)
		}
		for _, ac := range acs {
			procs[ac.Process] = true
			d.Agents = append(d.Agents, ac)
			if ac.Seconds == nil {
				why = append(why, "node "+n+": "+ac.Missing)
				complete = false
				continue
			}
			total += *ac.Seconds
		}
	}
	if len(d.Agents) == 0 && len(why) == 0 {
		r.Missing["cpu.datapath"] = fmt.Sprintf("no datapath agent (%s) runs in the host network of %s",
			strings.Join(Agents, ", "), strings.Join(none, ", "))
		return
	}
	var names []string
	for p := range procs {
		names = append(names, p)
	}
	sort.Strings(names)
	d.Process = "agents: " + strings.Join(names, ", ") + " on " + strings.Join(nodes, ", ")
	for _, k := range []string{"pmd_seconds", "pmd_pct", "pmd_busy_pct"} {
		r.Missing["cpu.datapath."+k] = "no poll-mode threads: the agents' CPU in a Kubernetes run is their process time"
	}
	if !complete {
		reason := strings.Join(why, "; ")
		for _, k := range []string{"seconds", "pct", "us_per_transaction", "seconds_per_gb"} {
			r.Missing["cpu.datapath."+k] = reason
		}
	} else {
		wall := end.Sub(start).Seconds()
		d.Seconds, d.Pct = result.F(total), result.F(100*total/wall)
		if r.Transactions != nil && r.Transactions.Count > 0 {
			d.UsPerTransaction = result.F(total * 1e6 / float64(r.Transactions.Count))
		} else {
			r.Missing["cpu.datapath.us_per_transaction"] = "no transactions in this test"
		}
		if r.Throughput != nil && r.Throughput.BytesReceived != nil && *r.Throughput.BytesReceived > 0 {
			d.SecondsPerGB = result.F(total / (float64(*r.Throughput.BytesReceived) / 1e9))
		} else {
			r.Missing["cpu.datapath.seconds_per_gb"] = "no bytes received in this test"
		}
	}
	if r.CPU == nil {
		r.CPU = &result.CPU{}
	}
	r.CPU.Datapath = d
}

// noAgents marks a node skipped because its probe found no agent: not a
// failure, the node's agents cost nothing because there are none.
const noAgents = "no datapath agent runs there"

// meterName names the agent meter pod on node i of the run.
func meterName(runID string, i int) string { return runid.Name(runID, "agents-"+strconv.Itoa(i)) }

// AgentMeterPod is the agent meter for one node: hostPID and the host
// network (see the comment at the top of this file), nobody, no
// capabilities, read-only, tolerating every taint like the node probe.
func AgentMeterPod(o PodOptions, name, node string, deadline int64) *corev1.Pod {
	pod := o.basePod(name, "", "meter", Placement{HostNetwork: true}, node)
	pod.Spec.HostPID = true
	pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	pod.Spec.Containers[0].Args = []string{"k8s", "agent-cpu", "--interval", AgentInterval.String()}
	pod.Spec.Containers[0].Env = nil
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.ActiveDeadlineSeconds = ptr(deadline)
	return pod
}

// agentMeters are a run's meter pods: node -> pod, or node -> why none.
type agentMeters struct {
	pods map[string]string
	skip map[string]string
}

// startMeters starts a meter on each node whose probe found an agent and
// waits for it to run. A node without agents, or whose meter does not
// start, is recorded in skip with the reason; the run goes on.
func (r *Runner) startMeters(ctx context.Context, po PodOptions, nodes []string, probes []NodeProbe, timeout time.Duration, life int64, log io.Writer) *agentMeters {
	m := &agentMeters{pods: map[string]string{}, skip: map[string]string{}}
	byNode := map[string]NodeProbe{}
	for _, p := range probes {
		byNode[p.Node] = p
	}
	api := r.Client.CoreV1().Pods(po.Namespace)
	for i, n := range nodes {
		if p, ok := byNode[n]; ok && p.Error == "" && len(p.Agents) == 0 {
			m.skip[n] = noAgents
			continue
		}
		name := meterName(po.RunID, i)
		if _, err := api.Create(ctx, AgentMeterPod(po, name, n, life), metav1.CreateOptions{}); err != nil {
			m.skip[n] = "node " + n + ": " + APIError("create", "agent meter pod", err).Error()
			continue
		}
		m.pods[n] = name
	}
	for n, name := range m.pods {
		pod, err := r.waitPod(ctx, po.Namespace, name, timeout, podStarted)
		if err == nil && pod.Status.Phase != corev1.PodRunning {
			err = errors.New(r.explain(ctx, pod))
		}
		if err != nil {
			m.skip[n] = "node " + n + ": agent meter pod " + name + ": " + oneLine(err.Error())
			delete(m.pods, n)
			fmt.Fprintf(log, "agent CPU on %s: not measured: %s\n", n, m.skip[n])
			continue
		}
		fmt.Fprintf(log, "agent CPU on %s: meter %s running\n", n, name)
	}
	return m
}

// fold reads the meters of the sample's nodes and puts the agents' CPU of
// each result's window into it. The meter may not yet have printed the
// sample after the last window's end; it is read again once if so.
func (m *agentMeters) fold(ctx context.Context, r *Runner, ns string, s *Sample) {
	nodes := []string{s.ClientNode}
	if s.ServerNode != s.ClientNode {
		nodes = append(nodes, s.ServerNode)
	}
	var lastEnd int64
	var since *metav1.Time
	for _, res := range s.Results {
		st, e, ok := measuredWindow(res)
		if !ok {
			continue
		}
		lastEnd = max(lastEnd, e.UnixNano())
		// Only the lines around this pod's windows, so a long run does
		// not read its whole meter log after every pod.
		if t := st.Add(-10 * time.Second); since == nil || t.Before(since.Time) {
			since = &metav1.Time{Time: t}
		}
	}
	logs, skip := m.read(ctx, r, ns, nodes, since, lastEnd)
	for _, res := range s.Results {
		FoldAgentCPU(res, nodes, logs, skip)
	}
}

// read reads the meters of nodes from since and parses their samples:
// node -> samples, or node -> why none. A meter whose last sample is
// before lastEnd (Unix ns) may not have printed it yet; it is read again
// once, two samples later.
func (m *agentMeters) read(ctx context.Context, r *Runner, ns string, nodes []string, since *metav1.Time, lastEnd int64) (map[string][]AgentSample, map[string]string) {
	logs := map[string][]AgentSample{}
	skip := map[string]string{}
	for _, n := range nodes {
		if why, ok := m.skip[n]; ok {
			skip[n] = why
			continue
		}
		name := m.pods[n]
		for try := 0; ; try++ {
			b, err := r.logsOpt(ctx, ns, name, &corev1.PodLogOptions{Container: containerName, SinceTime: since})
			if err != nil {
				skip[n] = "node " + n + ": " + APIError("read", "log of "+name, err).Error()
				break
			}
			logs[n] = ParseAgentLog(b)
			if try > 0 || len(logs[n]) == 0 || logs[n][len(logs[n])-1].T >= lastEnd {
				break
			}
			select {
			case <-ctx.Done():
				return logs, skip
			case <-time.After(2 * AgentInterval):
			}
		}
	}
	return logs, skip
}
