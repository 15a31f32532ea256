package pressure

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
)

// The privileged tests ramp real labs: a native topology with the
// conntrack rule on its nodes, and nf_conntrack_max — host-wide on this
// kernel — set by the lab's journal for the ramp only.

const (
	ctMaxPath    = "/proc/sys/net/netfilter/nf_conntrack_max"
	hashsizePath = "/sys/module/nf_conntrack/parameters/hashsize"
)

func armWith(t *testing.T, name string, knobs map[string]string) Arm {
	t.Helper()
	s, err := lab.Resolve("native", "", knobs)
	if err != nil {
		t.Fatal(err)
	}
	return Arm{Name: name, Topology: "native", Knobs: knobs, Spec: s}
}

// hostValues reads the host-wide settings a ramp may change, as bytes.
func hostValues(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range []string{ctMaxPath, hashsizePath} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Skipf("no conntrack module here: %v", err)
		}
		out[p] = string(b)
	}
	return out
}

// checkGone fails the test for any namespace or state file of the ramps'
// labs still there. (Other sessions' labs may come and go meanwhile: only
// the ids the ramps report are checked.)
func checkGone(t *testing.T, path string, res []ArmResult) {
	t.Helper()
	for _, a := range res {
		for _, r := range a.Ramps {
			if r.LabID == "" {
				t.Errorf("%s: a ramp without its lab's id: %+v", path, r)
				continue
			}
			left, err := netns.List("cnb-" + r.LabID + "-")
			if err != nil {
				t.Fatal(err)
			}
			if len(left) > 0 {
				t.Errorf("%s: lab %s left namespaces %v", path, r.LabID, left)
			}
			for _, l := range mustLabs(t) {
				if l.ID == r.LabID {
					t.Errorf("%s: lab %s left its state file", path, l.Name)
				}
			}
		}
	}
}

func mustLabs(t *testing.T) []*lab.Lab {
	t.Helper()
	ls, err := lab.List()
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// The knee moves with nf_conntrack_max, and the counters say why: with a
// table of 1,024 entries the TIME_WAIT entries of the completed
// connections (120 s each: 300 + 600 after two steps) fill it in the third, the node's
// conntrack drop counter moves and the count stands at the limit; with
// 16,384 the same offered load leaves it far from full and nothing is
// dropped, so the ramp goes further. Held flows beyond the limit are
// refused by the same counter. The host's nf_conntrack_max comes back
// byte for byte.
func TestPrivKneeMovesWithConntrackMax(t *testing.T) {
	testns.HostWide(t)
	before := hostValues(t)
	small := armWith(t, "ct-1k", map[string]string{"conntrack": "on", "conntrack_max": "1024"})
	large := armWith(t, "ct-16k", map[string]string{"conntrack": "on", "conntrack_max": "16384"})
	cfg := Config{Flows: []int{0}, Rates: []int{300, 600, 1200}, Step: Duration(time.Second)}.WithDefaults()
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), []Arm{small, large}, Options{Config: cfg, Binary: testns.Binary(t)})
	if err != nil {
		t.Fatal(err)
	}
	checkGone(t, "ramps", res)
	rs, rl := res[0].Ramps[0], res[1].Ramps[0]
	if rs.Error != "" || rl.Error != "" {
		t.Fatalf("ramps failed: %q %q", rs.Error, rl.Error)
	}
	if rs.Knee == nil || rs.Knee.Cause != "conntrack_full" || rs.Knee.ClientLimited {
		t.Fatalf("1,024 entries: knee %+v (steps %+v)", rs.Knee, rs.Steps)
	}
	last := rs.Steps[len(rs.Steps)-1]
	full := false
	for _, n := range last.Namespaces {
		if n.Stats != nil && n.Stats.Drop > 0 && n.Count >= n.Max-8 && n.Max == 1024 {
			full = true
		}
	}
	if !full {
		t.Errorf("1,024 entries: no namespace with drops at a full table: %+v", last.Namespaces)
	}
	for _, s := range rl.Steps {
		for _, n := range s.Namespaces {
			if n.Stats != nil && (n.Stats.Drop > 0 || n.Max != 16384) {
				t.Errorf("16,384 entries at %v/s: %s dropped %d, max %d", s.OfferedRate, n.Role, n.Stats.Drop, n.Max)
			}
		}
	}
	moved := rl.Knee == nil || rl.Knee.FailedOffered > rs.Knee.FailedOffered
	if !moved {
		t.Errorf("the knee did not move: 1,024 → failed at %v/s, 16,384 → %+v", rs.Knee.FailedOffered, rl.Knee)
	}
	if rl.Knee != nil && rl.Knee.Cause == "conntrack_full" {
		t.Errorf("16,384 entries: conntrack full at %v/s", rl.Knee.FailedOffered)
	}

	// Held flows beyond the table: the holder gets at most about 1,024
	// of 1,500, the rest time out, and the node's counters say why.
	cfg.Flows, cfg.Rates = []int{1500}, []int{100}
	res, err = Run(context.Background(), []Arm{small}, Options{Config: cfg, Binary: testns.Binary(t)})
	if err != nil {
		t.Fatal(err)
	}
	checkGone(t, "held flows", res)
	h := res[0].Ramps[0].Held
	if h.Established > 1024 || h.OpenTimedOut == 0 || h.OpenClient != 0 {
		t.Errorf("1,500 held flows through 1,024 entries: %+v", h)
	}
	var drops uint64
	for _, n := range h.Counters {
		if n.Stats != nil {
			drops += n.Stats.Drop
		}
	}
	if drops == 0 {
		t.Errorf("held flows refused with no conntrack drop counted: %+v", h.Counters)
	}
	if got := hostValues(t); got[ctMaxPath] != before[ctMaxPath] || got[hashsizePath] != before[hashsizePath] {
		t.Errorf("host values not restored: %q, before %q", got, before)
	}
}

// Every exit path restores what the knobs changed on the host — the end of
// a ramp, a ramp that fails after its lab is up, and a cancelled run — and
// leaves no lab behind.
func TestPrivHostLimitsRestoredOnEveryPath(t *testing.T) {
	testns.HostWide(t)
	before := hostValues(t)
	arm := armWith(t, "limits", map[string]string{"conntrack": "on", "conntrack_max": "4096", "conntrack_buckets": "2048", "conntrack_timeout_time_wait": "5"})
	base := Config{Flows: []int{50}, Rates: []int{100, 200}, Step: Duration(500 * time.Millisecond)}.WithDefaults()
	check := func(path string, res []ArmResult) {
		t.Helper()
		got := hostValues(t)
		for p, v := range before {
			if got[p] != v {
				t.Errorf("%s: %s is %q, was %q", path, p, got[p], v)
			}
		}
		checkGone(t, path, res)
	}
	// A ramp to its end; while it runs the limits hold (read in the
	// counters of every step).
	res, err := Run(context.Background(), []Arm{arm}, Options{Config: base, Binary: testns.Binary(t)})
	if err != nil || res[0].Ramps[0].Error != "" {
		t.Fatalf("end: %v %q", err, res[0].Ramps[0].Error)
	}
	seen := false
	for _, n := range res[0].Ramps[0].Steps[0].Namespaces {
		if n.Role == "node1" && n.Max == 4096 {
			seen = true
		}
	}
	if !seen {
		t.Errorf("nf_conntrack_max 4096 not in force during the ramp: %+v", res[0].Ramps[0].Steps[0].Namespaces)
	}
	check("end", res)

	// A ramp that fails once its lab is up: more source addresses than
	// the pod's /24 has room for.
	bad := base
	bad.Sources = 60
	res, err = Run(context.Background(), []Arm{arm}, Options{Config: bad, Binary: testns.Binary(t)})
	if err != nil || !strings.Contains(res[0].Ramps[0].Error, "no room") {
		t.Fatalf("failure: %v %q", err, res[0].Ramps[0].Error)
	}
	check("failure", res)

	// Cancelled during the first step.
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	long := base
	long.Step = Duration(2 * time.Second)
	res, err = Run(ctx, []Arm{arm}, Options{Config: long, Binary: testns.Binary(t)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled: %v", err)
	}
	check("cancel", res)
}

// A `cnibench pressure` killed with SIGKILL while its lab holds the
// host-wide limits: `cnibench lab clean --id` restores them byte for byte
// and removes the lab, and the server process has gone by itself (its
// standard input, the run's pipe, closed with the run).
func TestPrivPressureKilledThenCleaned(t *testing.T) {
	testns.HostWide(t)
	before := hostValues(t)
	bin := testns.Binary(t)
	dir := t.TempDir()
	stateRoot := filepath.Join(dir, "state")
	// The run stores into a database of its own, not the user's default.
	env := append(os.Environ(), "CNIBENCH_STATE_DIR="+stateRoot, "CNIBENCH_DB="+filepath.Join(dir, "r.db"))
	exp := filepath.Join(dir, "kill.yaml")
	if err := os.WriteFile(exp, []byte(`name: kill
tests: [tcp_crr]
arms:
  - {name: ct, topology: native, knobs: {conntrack: "on", conntrack_max: "8192", conntrack_buckets: "4096"}}
pressure:
  flows: [100]
  rates: [100, 200]
  step: 5s
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(bin, "pressure", exp)
	run.Env = env
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			run.Process.Kill()
			run.Wait()
		}
		// Whatever the test saw, leave nothing of its own: `lab clean
		// --id` for each lab of the private state root. Never a bare `lab
		// clean`, which sweeps every cnb- namespace on the host, other
		// sessions' included.
		for _, id := range stateIDs(stateRoot) {
			c := exec.Command(bin, "lab", "clean", "--id", id)
			c.Env = env
			if out, err := c.CombinedOutput(); err != nil {
				t.Errorf("cleanup: lab clean --id %s: %v\n%s", id, err, out)
			}
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(ctMaxPath)
		if strings.TrimSpace(string(b)) == "8192" && serverPids(bin) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b, _ := os.ReadFile(ctMaxPath); strings.TrimSpace(string(b)) != "8192" {
		t.Fatalf("nf_conntrack_max never became 8192 while the run ran (%q)", b)
	}
	run.Process.Signal(syscall.SIGKILL)
	run.Wait()
	killed = true
	if got := hostValues(t); got[ctMaxPath] == before[ctMaxPath] {
		t.Fatalf("the limits came back without lab clean: the kill landed too late to test anything")
	}
	ids := stateIDs(stateRoot)
	if len(ids) != 1 {
		t.Fatalf("labs after the kill: %v", ids)
	}
	id := ids[0]
	clean := exec.Command(bin, "lab", "clean", "--id", id)
	clean.Env = env
	if out, err := clean.CombinedOutput(); err != nil {
		t.Fatalf("lab clean --id %s: %v\n%s", id, err, out)
	}
	if got := hostValues(t); got[ctMaxPath] != before[ctMaxPath] || got[hashsizePath] != before[hashsizePath] {
		t.Errorf("after lab clean: %q, before %q", got, before)
	}
	if left, _ := netns.List("cnb-" + id + "-"); len(left) > 0 {
		t.Errorf("namespaces left: %v", left)
	}
	deadline = time.Now().Add(5 * time.Second)
	for serverPids(bin) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := serverPids(bin); n > 0 {
		t.Errorf("%d pressure-server processes of %s left", n, bin)
	}
}

// serverPids counts running `BIN pressure-server` processes.
func serverPids(bin string) int {
	return len(driver.Procs("cmdline", func(_ int, cmdline []byte) bool {
		args := strings.Split(string(cmdline), "\x00")
		return len(args) > 1 && args[0] == bin && args[1] == "pressure-server"
	}))
}

// stateIDs are the run ids of the labs whose state files are in the
// private state root (named <preset>-<id>.json).
func stateIDs(stateRoot string) []string {
	labs, _ := filepath.Glob(filepath.Join(stateRoot, "labs", "*.json"))
	var ids []string
	for _, l := range labs {
		n := strings.TrimSuffix(filepath.Base(l), ".json")
		if id := n[strings.LastIndex(n, "-")+1:]; runid.Valid(id) {
			ids = append(ids, id)
		}
	}
	return ids
}
