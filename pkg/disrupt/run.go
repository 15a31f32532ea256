package disrupt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/lab"
)

// Schema names the result document's version (docs/json-schema.md).
const Schema = "cnibench.disruption/v1"

// Result is a disruption experiment's outcome: each arm's timelines and
// the comparisons of every arm's events against the baseline's.
type Result struct {
	Schema      string        `json:"schema"`
	Name        string        `json:"name"`
	Description string        `json:"description,omitempty"`
	Started     time.Time     `json:"started"`
	Spec        string        `json:"spec,omitempty"`
	Baseline    string        `json:"baseline"`
	Arms        []*ArmResult  `json:"arms"`
	Comparisons []*Comparison `json:"comparisons"`
}

// ArmResult is one arm's run.
type ArmResult struct {
	Name     string            `json:"name"`
	Topology string            `json:"topology"`
	Knobs    map[string]string `json:"knobs,omitempty"`
	Target   string            `json:"target"`
	// LabID is the run id the arm's lab was built under (cnb-<id>-…).
	LabID string `json:"lab_id"`
	// Timelines has one timeline per probe, all over the same events.
	Timelines []*Timeline `json:"timelines"`
	// ProbeCPUPct is the CPU the probes and their echo took, as a
	// percentage of one CPU over the arm's probing time: this process's
	// user and system time less the agents' in-process netlink batches.
	ProbeCPUPct    *float64 `json:"probe_cpu_pct"`
	ProbeCPUReason string   `json:"probe_cpu_reason,omitempty"`
	// HostConntrackMax is net.netfilter.nf_conntrack_max when the probes
	// started and when they stopped: another tenant lowering it while the
	// connect-per-request probe's entries pile up drops its SYNs ("table
	// full"), which is then no event's doing. Null when unreadable.
	HostConntrackMax []*int `json:"host_conntrack_max"`
	// Restored says the rules of every namespace the events touched were
	// identical to the start's when the arm ended (journal.go).
	Restored bool `json:"restored"`
}

// Options tunes Run.
type Options struct {
	Log io.Writer // progress; nil = silent
}

func (o Options) logf(format string, a ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", a...)
	}
}

// Run builds each arm's lab, runs its probes while the events fire, and
// tears the lab down on every path out. Arms run one after another.
func Run(ctx context.Context, s *Spec, o Options) (*Result, error) {
	res := &Result{Schema: Schema, Name: s.Name, Description: s.Description, Started: time.Now().UTC(), Spec: s.text, Baseline: s.Baseline}
	for i := range s.Arms {
		ar, err := runArm(ctx, s, &s.Arms[i], o)
		if ar != nil {
			res.Arms = append(res.Arms, ar)
		}
		if err != nil {
			return res, fmt.Errorf("arm %s: %w", s.Arms[i].Name, err)
		}
	}
	res.Comparisons = Compare(res)
	return res, nil
}

// slot is one firing of the event list.
type slot struct {
	at  time.Duration
	ev  EventSpec
	src Source
}

func runArm(ctx context.Context, s *Spec, a *ArmSpec, o Options) (_ *ArmResult, err error) {
	o.logf("%s: lab up %s %v", a.Name, a.Topology, a.Knobs)
	l, err := lab.Up(ctx, a.lab, lab.UpOptions{})
	if err != nil {
		return nil, err
	}
	defer func() {
		// Down on every path; its context is not the run's, so Ctrl-C
		// still removes the lab.
		if derr := l.Down(context.Background()); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	srv, err := l.Endpoint("server")
	if err != nil {
		return nil, err
	}
	cli, err := l.Endpoint("client")
	if err != nil {
		return nil, err
	}
	addr := srv.IP
	if a.Server == "service" {
		addr = l.ServiceIP
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", addr, err)
	}
	target := netip.AddrPortFrom(ip, ProbePort)
	echo, err := StartEcho(srv.Netns, ProbePort)
	if err != nil {
		return nil, err
	}
	defer echo.Close()

	var slots []slot
	settle, spacing := time.Duration(s.Settle), time.Duration(s.Spacing)
	touched := map[string]bool{}
	for r := 0; r < s.Repeats; r++ {
		for _, ev := range s.Events {
			if ev.Kind == EndpointChange && ev.Service < 0 {
				ev.Service = (l.Spec.Services - 1) / 2
			}
			src, err := NewSource(l, ev, l.ID)
			if err != nil {
				return nil, err
			}
			for _, ns := range src.Netns() {
				touched[ns] = true
			}
			slots = append(slots, slot{at: settle + time.Duration(len(slots))*spacing, ev: ev, src: src})
		}
	}
	planned := settle + time.Duration(len(slots))*spacing

	// The rules as they are before any event: every undo must return to
	// them, checked once the probes stop.
	j, err := OpenJournal(l.ID)
	if err != nil {
		return nil, err
	}
	var nsList []string
	for ns := range touched {
		nsList = append(nsList, ns)
	}
	sort.Strings(nsList)
	base, err := j.Change(ctx, "run", nsList)
	if err != nil {
		j.Close(false)
		return nil, err
	}
	ar := &ArmResult{Name: a.Name, Topology: a.Topology, Knobs: a.Knobs, Target: target.String(), LabID: l.ID}
	restored := false
	defer func() {
		j.Close(restored)
	}()

	// The probes run until stopped: past the plan when an event's change
	// takes longer than the spacing, so every event keeps its window.
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	probes := s.probes(a)
	reqs := make([][]Request, len(probes))
	perrs := make([]error, len(probes))
	t0 := time.Now().Add(100 * time.Millisecond)
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps := ProbeSpec{Kind: p.Kind, Rate: p.Rate, Timeout: time.Duration(p.Timeout)}
			reqs[i], perrs[i] = ps.Run(ctx, stop, cli.Netns, target, t0)
		}()
	}
	cpu0 := selfCPU()
	ctMax0 := readInt("/proc/sys/net/netfilter/nf_conntrack_max")
	o.logf("%s: probing %s for %s, %d events", a.Name, target, planned.Round(time.Millisecond), len(slots))

	var marks []Mark
	var inProc time.Duration
	var pending func(context.Context) (*time.Duration, error)
	fireErr := func() error {
		for k, sl := range slots {
			if !waitUntil(ctx, t0.Add(sl.at)) {
				return ctx.Err()
			}
			t1 := time.Now()
			f, undo, err := sl.src.Fire(ctx)
			t2 := time.Now()
			pending = undo
			if err != nil {
				return fmt.Errorf("event %d (%s): %w", k, sl.ev.Kind, err)
			}
			if !f.Start.IsZero() {
				t1 = f.Start
			}
			if !f.End.IsZero() {
				t2 = f.End
			}
			start, end, cpu := t1.Sub(t0), t2.Sub(t0), f.CPU
			m := Mark{Kind: string(sl.ev.Kind), Start: start, End: end, AgentCPU: cpu, AgentCPUReason: f.CPUReason,
				Detail: joinDetail(detail(sl.ev), f.Detail)}
			if late := start - sl.at; late > 50*time.Millisecond {
				m.Detail = joinDetail(m.Detail, fmt.Sprintf("fired %s after its slot: the event before took longer than the spacing", late.Round(time.Millisecond)))
			}
			inProc += inProcess(l, sl.ev.Kind, cpu)
			marks = append(marks, m)
			if undo == nil {
				continue
			}
			// A lasting change is reverted halfway to the next event:
			// the revert is the same kind of update, judged on its own.
			if !waitUntil(ctx, t0.Add(sl.at+spacing/2)) {
				return ctx.Err()
			}
			start = time.Since(t0)
			cpu, err = undo(ctx)
			end = time.Since(t0)
			if err != nil {
				return fmt.Errorf("event %d (%s) revert: %w", k, sl.ev.Kind, err)
			}
			pending = nil
			inProc += inProcess(l, sl.ev.Kind, cpu)
			marks = append(marks, Mark{Kind: string(sl.ev.Kind), Label: "revert", Start: start, End: end, AgentCPU: cpu, Detail: detail(sl.ev)})
		}
		return nil
	}()
	// The last event gets a whole spacing after its change, as planned.
	total := planned
	if n := len(marks); n > 0 {
		total = max(total, marks[n-1].End+spacing)
	}
	if fireErr == nil {
		waitUntil(ctx, t0.Add(total))
	}
	cancel()
	wg.Wait()
	wall := time.Since(t0)
	cpu1 := selfCPU()
	ar.HostConntrackMax = []*int{ctMax0, readInt("/proc/sys/net/netfilter/nf_conntrack_max")}
	if pending != nil {
		// The run failed or was interrupted mid-change: undo it first.
		if _, err := pending(context.Background()); err != nil {
			fireErr = errors.Join(fireErr, fmt.Errorf("undo: %w", err))
		}
	}
	if err := base.Verify(context.Background()); err != nil {
		fireErr = errors.Join(fireErr, err)
	} else {
		restored = true
		ar.Restored = true
	}
	if fireErr != nil {
		return ar, fireErr
	}
	for i, p := range probes {
		if perrs[i] != nil {
			return ar, fmt.Errorf("probe %s: %w", p.Kind, perrs[i])
		}
		ar.Timelines = append(ar.Timelines, Build(string(p.Kind), p.Rate, time.Duration(p.Timeout), time.Duration(s.Bucket), total, reqs[i], marks))
	}
	if cpu0 < 0 || cpu1 < 0 {
		ar.ProbeCPUReason = "getrusage failed"
	} else {
		v := float64(cpu1-cpu0-inProc) / float64(wall) * 100
		ar.ProbeCPUPct = &v
	}
	o.logf("%s: done, rules restored", a.Name)
	return ar, nil
}

// inProcess is the part of an event's agent CPU spent in this process
// (nftables batches sent from its threads), which the probe's CPU
// excludes; iptables-restore runs as a child.
func inProcess(l *lab.Lab, k EventKind, cpu *time.Duration) time.Duration {
	if cpu == nil {
		return 0
	}
	if k == PolicyReplace || ((k == ProxyResync || k == EndpointChange) && l.Spec.Proxy == lab.ProxyNFTables) {
		return *cpu
	}
	return 0
}

func detail(ev EventSpec) string {
	switch ev.Kind {
	case Blackhole:
		return fmt.Sprintf("drop all IPv4 into the server for %s", time.Duration(ev.Duration))
	case EndpointChange:
		return fmt.Sprintf("Service %d's endpoint moved", ev.Service)
	case VswitchdRestart, OVNControllerRestart, OVNNorthdRestart, OVNNBRestart, OVNSBRestart:
		where := "the central"
		if d := restarts[ev.Kind]; d.PerNode() {
			where = fmt.Sprintf("node%d's", ev.Node)
		}
		return fmt.Sprintf("%s %s restarted; its CPU is the new daemon's run time until the lab serves again (schedstat)", where, restarts[ev.Kind])
	}
	return ""
}

// joinDetail joins the non-empty parts of an event's detail.
func joinDetail(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), "; ")
}

// readInt reads a number from a /proc file; nil when it cannot.
func readInt(path string) *int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil
	}
	return &v
}

// selfCPU is this process's user+system time; -1 when unreadable.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
