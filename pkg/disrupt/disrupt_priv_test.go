package disrupt

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/store"
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

// noLeftovers fails t if a namespace of one of res's labs is still there
// (other sessions' labs come and go on this host: only ours are checked).
func noLeftovers(t *testing.T, res *Result) {
	t.Helper()
	if res == nil {
		return
	}
	after, _ := netns.List("cnb-")
	for _, a := range res.Arms {
		for _, n := range after {
			if strings.HasPrefix(n, "cnb-"+a.LabID+"-") {
				t.Errorf("namespace %s left behind", n)
			}
		}
	}
}

// The timeline's resolution checked: a blackhole of known length (200 ms)
// is measured within one bucket (100 ms) by both probes, and every event
// is on the timeline where it happened.
func TestPrivBlackholeWithinBucket(t *testing.T) {
	testns.NeedRoot(t)
	t.Setenv("CNIBENCH_STATE_DIR", t.TempDir())
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
	noLeftovers(t, res)
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
			t.Logf("%s event %d at %.1f ms (change %.2f ms): gap %.1f ms, lost %d, recover %v", tl.Probe, i, e.StartMs, e.ChangeDurationMs, e.LongestGapMs, e.Failed+e.Timeouts, deref(e.RecoverMs))
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

// Every agent event source, in every mode, fires on a real lab and leaves
// the rules of every namespace it touched byte for byte as they were.
func TestPrivSourcesRestore(t *testing.T) {
	testns.NeedRoot(t)
	t.Setenv("CNIBENCH_STATE_DIR", t.TempDir())
	s := mustSpec(t, `
name: t
probes: [{kind: udp-rr, rate: 200}]
settle: 300ms
spacing: 1200ms
events: [{kind: kube-proxy-resync}, {kind: endpoint-change, service: 3}]
arms:
  - {name: ipt, topology: native, knobs: {proxy: iptables, services: "20"}, server: service}
  - {name: nft, topology: native, knobs: {proxy: nftables, services: "20"}, server: service}
`)
	res, err := Run(context.Background(), s, Options{})
	noLeftovers(t, res)
	if err != nil {
		t.Fatal(err)
	}
	p := mustSpec(t, `
name: p
probes: [{kind: udp-rr, rate: 200}]
settle: 300ms
spacing: 1200ms
events: [{kind: policy-replace}]
arms:
  - {name: linear, topology: native, knobs: {policies: "50", policy_mode: linear}}
  - {name: set, topology: native, knobs: {policies: "50", policy_mode: set}}
`)
	pres, err := Run(context.Background(), p, Options{})
	noLeftovers(t, pres)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range append(res.Arms, pres.Arms...) {
		if !a.Restored {
			t.Errorf("%s: not restored", a.Name)
		}
		tl := a.Timelines[0]
		for _, e := range tl.Events {
			t.Logf("%s %s %s: agent CPU %v ms, gap %.1f ms, lost %d", a.Name, e.Kind, e.Label, deref(e.AgentCPUMs), e.LongestGapMs, e.Failed+e.Timeouts)
			if e.AgentCPUMs == nil || *e.AgentCPUMs <= 0 {
				t.Errorf("%s %s: agent CPU %v, want a measured positive time", a.Name, e.Kind, e.AgentCPUMs)
			}
			// A resync rewrites the same rules and one endpoint change of
			// a Service nobody dials must not cut the probed one.
			if e.Failed+e.Timeouts > 0 {
				t.Errorf("%s %s %s: %d requests lost", a.Name, e.Kind, e.Label, e.Failed+e.Timeouts)
			}
		}
		if a.Name == "ipt" || a.Name == "nft" {
			if n := len(tl.Events); n != 3 {
				t.Errorf("%s: %d events, want resync, change, revert", a.Name, n)
			}
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// Interrupted mid-change — inside a blackhole, between an endpoint change
// and its revert — the run still undoes the change, checks the rules are
// back and removes its lab.
func TestPrivInterruptedRestores(t *testing.T) {
	testns.NeedRoot(t)
	t.Setenv("CNIBENCH_STATE_DIR", t.TempDir())
	for _, tc := range []struct{ name, events, knobs, after string }{
		{"blackhole", "[{kind: blackhole, duration: 400ms}]", "{}", "400ms"},
		{"endpoint", "[{kind: endpoint-change, service: 1}]", `{proxy: nftables, services: "5"}`, "500ms"},
		{"endpoint-ipt", "[{kind: endpoint-change, service: 1}]", `{proxy: iptables, services: "5"}`, "500ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSpec(t, `
name: i
probes: [{kind: udp-rr, rate: 100}]
settle: 300ms
spacing: 2s
events: `+tc.events+`
arms: [{name: a, topology: native, knobs: `+tc.knobs+`, server: server}]
`)
			ctx, cancel := context.WithCancel(context.Background())
			after, _ := time.ParseDuration(tc.after)
			// Settle (300 ms) plus the probe's 100 ms start: the event has
			// fired and is held when the run is cancelled.
			go func() {
				for {
					ents, _ := os.ReadDir(journalDir())
					if len(ents) > 0 {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(400*time.Millisecond + after/2)
				cancel()
			}()
			res, err := Run(ctx, s, Options{})
			noLeftovers(t, res)
			if err == nil {
				t.Fatal("an interrupted run returned no error")
			}
			if len(res.Arms) != 1 || !res.Arms[0].Restored {
				t.Fatalf("interrupted: %v; arm not restored", err)
			}
			ents, _ := os.ReadDir(journalDir())
			if len(ents) != 0 {
				t.Errorf("journal kept after a restored run: %v", ents)
			}
		})
	}
}

// The restore check can fail: a rule left behind is named.
func TestPrivVerifyCatchesALeftover(t *testing.T) {
	p := testns.NewPair(t)
	t.Setenv("CNIBENCH_STATE_DIR", t.TempDir())
	j, err := OpenJournal("t" + p.A[4:8])
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close(true)
	ch, err := j.Change(context.Background(), "test", []string{p.A})
	if err != nil {
		t.Fatal(err)
	}
	bh := &blackhole{ns: p.A, table: p.A + "-bh"}
	if err := bh.drop(); err != nil {
		t.Fatal(err)
	}
	if err := ch.Verify(context.Background()); !errors.Is(err, ErrNotRestored) {
		t.Fatalf("a table left in place: Verify = %v, want ErrNotRestored", err)
	}
	if err := bh.lift(); err != nil {
		t.Fatal(err)
	}
	if err := bh.lift(); err != nil {
		t.Errorf("lifting twice: %v (a table already gone is no error)", err)
	}
	if err := ch.Verify(context.Background()); err != nil {
		t.Errorf("after the lift: %v", err)
	}
}

// The agent restarted: a node's private ovs-vswitchd stops and starts
// again; the probe sees the outage and then answers again, and the node's
// rules, links and addresses are as before.
func TestPrivVswitchdRestart(t *testing.T) {
	testns.NeedRoot(t)
	t.Setenv("CNIBENCH_STATE_DIR", t.TempDir())
	s := mustSpec(t, `
name: r
probes: [{kind: udp-rr, rate: 500}]
settle: 500ms
spacing: 4s
repeats: 2
events: [{kind: vswitchd-restart}]
arms: [{name: ovs, topology: ovs-netdev-geneve}]
`)
	res, err := Run(context.Background(), s, Options{})
	noLeftovers(t, res)
	if err != nil {
		if strings.Contains(err.Error(), "not supported") || strings.Contains(err.Error(), "not found") {
			t.Skipf("Open vSwitch not usable here: %v", err)
		}
		t.Fatal(err)
	}
	a := res.Arms[0]
	if !a.Restored {
		t.Error("not restored")
	}
	tl := a.Timelines[0]
	for i, e := range tl.Events {
		t.Logf("restart %d: change %.1f ms, agent CPU %v ms, gap %.1f ms, lost %d, recover %v", i, e.ChangeDurationMs, deref(e.AgentCPUMs), e.LongestGapMs, e.Failed+e.Timeouts, deref(e.RecoverMs))
		if e.RecoverMs == nil {
			t.Errorf("restart %d: the probe never recovered: %s", i, e.RecoverReason)
		}
		if e.AgentCPUMs == nil {
			t.Errorf("restart %d: agent CPU missing", i)
		}
	}
	for _, b := range tl.Buckets {
		if b.Timeouts+b.Failed > 0 {
			t.Logf("bucket at %.0f ms: %d sent, %d answered, %d timed out, %d failed", b.StartMs, b.Sent, b.OK, b.Timeouts, b.Failed)
		}
	}
	// The last second of the timeline answers at the full rate.
	last := tl.Buckets[len(tl.Buckets)-1]
	if last.OK == 0 || last.Timeouts > 0 {
		t.Errorf("after the restarts the probe is not answered: %+v", last)
	}
}

// Every OVN daemon the lab runs, restarted under a steady probe on both
// presets: each event is marked from its kill to the lab serving again,
// with the new daemon's CPU; every node's rules and links are as before;
// the probe recovers after each. The datapath does not need ovn-northd or
// the databases (ovn-controller keeps its switch's flows while they are
// away): those restarts lose nothing. A vswitchd restart stops the node's
// forwarding: a gap.
func TestPrivOVNRestarts(t *testing.T) {
	testns.HostWide(t)
	testns.NeedRoot(t)
	t.Setenv("CNIBENCH_STATE_DIR", t.TempDir())
	s := mustSpec(t, `
name: r
probes: [{kind: udp-rr, rate: 500}]
settle: 500ms
spacing: 3s
events: [{kind: ovn-controller-restart}, {kind: ovn-northd-restart}, {kind: ovn-nb-restart}, {kind: ovn-sb-restart}, {kind: vswitchd-restart}]
arms: [{name: overlay, topology: ovn-overlay}, {name: underlay, topology: ovn-underlay}]
`)
	res, err := Run(context.Background(), s, Options{})
	noLeftovers(t, res)
	if err != nil {
		if strings.Contains(err.Error(), "not supported") {
			t.Skipf("OVN not usable here: %v", err)
		}
		t.Fatal(err)
	}
	for _, a := range res.Arms {
		if !a.Restored {
			t.Errorf("%s: not restored", a.Name)
		}
		tl := a.Timelines[0]
		if len(tl.Events) != len(s.Events) {
			t.Fatalf("%s: %d events, want %d", a.Name, len(tl.Events), len(s.Events))
		}
		for _, e := range tl.Events {
			lost := e.Failed + e.Timeouts
			t.Logf("%s %s: kill to back %.1f ms, agent CPU %v ms, gap %.1f ms, lost %d, recover %v; %s", a.Name, e.Kind, e.ChangeDurationMs, deref(e.AgentCPUMs), e.LongestGapMs, lost, deref(e.RecoverMs), e.Detail)
			if e.AgentCPUMs == nil || *e.AgentCPUMs <= 0 || e.ChangeDurationMs <= 0 || !strings.Contains(e.Detail, "serving again at") {
				t.Errorf("%s %s: CPU %v, kill to back %.1f ms, detail %q", a.Name, e.Kind, deref(e.AgentCPUMs), e.ChangeDurationMs, e.Detail)
			}
			if e.RecoverMs == nil {
				t.Errorf("%s %s: the probe never recovered: %s", a.Name, e.Kind, e.RecoverReason)
			}
			switch EventKind(e.Kind) {
			case OVNNorthdRestart, OVNNBRestart, OVNSBRestart:
				if lost > 0 {
					t.Errorf("%s %s: %d requests lost; the datapath does not need it", a.Name, e.Kind, lost)
				}
			case VswitchdRestart:
				if e.LongestGapMs == 0 {
					t.Errorf("%s %s: no gap while the node's only forwarder was down", a.Name, e.Kind)
				}
			}
		}
		last := tl.Buckets[len(tl.Buckets)-1]
		if last.OK == 0 || last.Timeouts > 0 {
			t.Errorf("%s: after the restarts the probe is not answered: %+v", a.Name, last)
		}
	}
}

// A run killed (SIGKILL) while it restarts OVN daemons leaves only what
// `cnibench lab clean --id` removes: afterwards no daemon, namespace, run
// directory or lab state of it is left. The kill lands inside a restart
// (the daemon down, or started but the lab not serving yet) or at a
// random instant.
func TestPrivOVNRestartKilledRunCleaned(t *testing.T) {
	testns.HostWide(t)
	testns.NeedRoot(t)
	bin := testns.Binary(t)
	// A short state root: the daemons' sockets live under it (108 bytes).
	root, err := os.MkdirTemp("", "cnbk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	file := filepath.Join(root, "r.yaml")
	if err := os.WriteFile(file, []byte(`
name: k
probes: [{kind: udp-rr, rate: 200}]
settle: 200ms
spacing: 1200ms
repeats: 2
events: [{kind: ovn-controller-restart}, {kind: vswitchd-restart}]
arms: [{name: a, topology: ovn-overlay}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CNIBENCH_STATE_DIR="+root)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	for i := 0; i < 3; i++ {
		cmd := exec.Command(bin, "disrupt", "run", file)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The journal is written once the lab is up, before the first event.
		var id string
		for deadline := time.Now().Add(30 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			ents, _ := os.ReadDir(filepath.Join(root, "disrupt"))
			for _, e := range ents {
				if v, ok := strings.CutSuffix(strings.TrimPrefix(e.Name(), "cnb-"), ".jsonl"); ok {
					id = v
				}
			}
		}
		// Killed while node2's vswitchd is down (its pid file gone with
		// it, the new one not started), while the new one runs but the
		// lab does not serve yet, or at a random instant.
		when := []string{"daemon down", "daemon started", "random"}[i]
		pidfile := filepath.Join(root, "ovs", "cnb-"+id+"-node2", "ovs-vswitchd.pid")
		first, _ := os.ReadFile(pidfile)
		t0 := time.Now()
		for deadline := t0.Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
			b, err := os.ReadFile(pidfile)
			if (when == "daemon down" && err != nil) || (when == "daemon started" && err == nil && len(b) > 0 && !bytes.Equal(b, first)) {
				break
			}
			if when == "random" {
				time.Sleep(200*time.Millisecond + time.Duration(rng.Int64N(int64(4*time.Second))))
				break
			}
		}
		wait := time.Since(t0)
		_ = cmd.Process.Signal(unix.SIGKILL)
		_ = cmd.Wait()
		if id == "" {
			t.Fatalf("the run never wrote its journal: %s", out.String())
		}
		clean := exec.Command(bin, "lab", "clean", "--id", id)
		clean.Env = env
		co, err := clean.CombinedOutput()
		if err != nil {
			t.Fatalf("lab clean --id %s: %v\n%s", id, err, co)
		}
		t.Logf("killed (%s) %v after the journal: lab clean: %s", when, wait, strings.Join(strings.Fields(string(co)), " "))
		var left []string
		nss, _ := netns.List("cnb-" + id + "-")
		left = append(left, nss...)
		if ents, _ := os.ReadDir(filepath.Join(root, "ovs")); len(ents) > 0 {
			left = append(left, fmt.Sprintf("%d run directories", len(ents)))
		}
		// The lab's state and the journal of its settings (the journal
		// directory itself, with its lock, stays).
		states, _ := filepath.Glob(filepath.Join(root, "labs", "*.json"))
		left = append(left, states...)
		if ents, _ := os.ReadDir(filepath.Join(root, "labs", "journal")); len(ents) > 0 {
			for _, e := range ents {
				if e.Name() != ".lock" {
					left = append(left, "settings journal "+e.Name())
				}
			}
		}
		if pids := mentioning(filepath.Join(root, "ovs")); len(pids) > 0 {
			left = append(left, fmt.Sprintf("processes %v", pids))
		}
		// The run's disrupt journal goes too: what it names was all
		// inside the namespaces just removed.
		if ents, _ := os.ReadDir(filepath.Join(root, "disrupt")); len(ents) > 0 {
			for _, e := range ents {
				left = append(left, "disrupt journal "+e.Name())
			}
		}
		if len(left) > 0 {
			t.Errorf("killed (%s) after %v, then cleaned: left %v", when, wait, left)
		}
		os.RemoveAll(filepath.Join(root, "disrupt"))
	}
}

// mentioning lists the processes whose command line contains s.
func mentioning(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, pid)
		}
	}
	return out
}

// A probe has no length of its own: it runs until stopped, every request
// answered on a quiet pair, at its rate.
func TestPrivProbeRunsUntilStopped(t *testing.T) {
	p := testns.NewPair(t)
	echo, err := StartEcho(p.B, ProbePort)
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	target := netip.AddrPortFrom(netip.AddrFrom4([4]byte(p.BIP.To4())), ProbePort)
	for _, kind := range ProbeKinds {
		stop, cancel := context.WithCancel(context.Background())
		t0 := time.Now()
		time.AfterFunc(700*time.Millisecond, cancel)
		reqs, err := ProbeSpec{Kind: kind, Rate: 1000, Timeout: 200 * time.Millisecond}.Run(context.Background(), stop, p.A, target, t0)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if len(reqs) < 650 || len(reqs) > 710 {
			t.Errorf("%s: %d requests in 700 ms at 1000/s", kind, len(reqs))
		}
		for i, r := range reqs {
			if r.Outcome != OK || r.Latency <= 0 || (i > 0 && r.Sent < reqs[i-1].Sent) {
				t.Fatalf("%s: request %d: %+v", kind, i, r)
			}
		}
	}
}

// A run that fails before any arm is measured (here: interrupted before
// its lab is up) stores nothing: the database holds no run, and no lab is
// left behind.
func TestPrivFailedEarlyStoresNothing(t *testing.T) {
	testns.NeedRoot(t)
	t.Setenv("CNIBENCH_STATE_DIR", t.TempDir())
	path := filepath.Join(t.TempDir(), "r.db")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := &RunCommand{Ref: "blackhole-resolution", DB: path, Version: "test"}
	var out, log bytes.Buffer
	if err := c.Run(ctx, &out, &log); err == nil {
		t.Fatal("a cancelled run succeeded")
	}
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if runs, err := db.Runs(); err != nil || len(runs) != 0 {
		t.Errorf("runs stored by a run that measured nothing: %+v, %v", runs, err)
	}
	if strings.Contains(log.String(), "stored as run") || out.Len() > 0 {
		t.Errorf("printed %q / %q", out.String(), log.String())
	}
}

// A database that fails at the end loses nothing: the table is printed and
// -o written first, the run then exits with the storage error, and the
// failed transaction leaves no run behind. The failure is real: a trigger
// refuses the document's insert.
func TestPrivStoreFailureKeepsTheResult(t *testing.T) {
	testns.NeedRoot(t)
	t.Setenv("CNIBENCH_STATE_DIR", t.TempDir())
	dir := t.TempDir()
	path := filepath.Join(dir, "r.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	// The store's SQLite driver, registered by pkg/store.
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TRIGGER refuse BEFORE INSERT ON documents BEGIN SELECT RAISE(ABORT, 'injected failure'); END`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	spec := filepath.Join(dir, "bh.yaml")
	if err := os.WriteFile(spec, []byte("name: t\ndescription: d\nsettle: 500ms\nspacing: 1500ms\nevents: [{kind: blackhole, duration: 200ms}]\narms: [{name: veth, topology: veth}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(dir, "r.json")
	var out, log bytes.Buffer
	err = (&RunCommand{Ref: spec, JSON: js, DB: path, Version: "test"}).Run(context.Background(), &out, &log)
	if err == nil || !strings.Contains(err.Error(), "was not stored") || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("run with a failing database: %v\n%s", err, log.String())
	}
	if !strings.Contains(out.String(), "blackhole") {
		t.Errorf("the table was not printed:\n%s", out.String())
	}
	if _, err := os.Stat(js); err != nil {
		t.Errorf("-o not written: %v", err)
	}
	db, err = store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if runs, err := db.Runs(); err != nil || len(runs) != 0 {
		t.Errorf("a failed save left runs: %+v, %v", runs, err)
	}
}
