package cli

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite"
)

// Runs and labs stopped part-way, end to end as root: a signal asking
// `cnibench run` to stop (it stores what it finished and takes its labs
// down), a SIGKILL at a chosen moment (the lab journal lets `lab clean
// --id` put the host's bytes back), and SIGKILLs at random moments (the
// chaos tier). They share the lab-id, cleaning and reaping helpers.

// Ctrl-C in the middle of `cnibench run` (and a supervisor's SIGTERM, and a
// closed terminal's SIGHUP): the finished samples are stored, the run is
// marked incomplete, and no lab is left on the host.
func TestPrivRunInterrupted(t *testing.T) {
	for _, sig := range []unix.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) { runInterrupted(t, sig) })
	}
}

func runInterrupted(t *testing.T, sig unix.Signal) {
	bin, dir, exp := privExperiment(t, `
name: long
tests: [tcp_lat]
duration: 500ms
warmup: 0s
repeats: 50
arms:
  - name: veth
    topology: veth
  - name: bridge
    topology: bridge
`)
	db := filepath.Join(dir, "r.db")
	var stderr lockedBuffer
	cmd := exec.Command(bin, "run", exp, "--db", db, "--format", "none")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for a few finished steps, then interrupt.
	waitOutput(t, cmd, &stderr, "[3/100]", 60*time.Second)
	_ = cmd.Process.Signal(sig)
	err := cmd.Wait()
	if err == nil {
		t.Fatalf("interrupted run exited 0:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "run interrupted") {
		t.Errorf("no interruption message:\n%s", stderr.String())
	}

	run, samples, err := lastRun(t, db)
	if err != nil {
		t.Fatal(err)
	}
	if run.Complete || !strings.Contains(run.Status, "interrupted") || len(samples) < 3 || len(samples) >= 100 {
		t.Fatalf("run complete=%v status=%q samples=%d", run.Complete, run.Status, len(samples))
	}
	for _, x := range samples {
		if x.Error != "" {
			t.Errorf("a stored sample is a failure: %s", x.Error)
		}
	}
	// The labs named in the log must be gone.
	for _, line := range strings.Split(stderr.String(), "\n") {
		if !strings.HasPrefix(line, "lab ") || !strings.Contains(line, " up (") {
			continue
		}
		name := strings.Fields(line)[1] // e.g. veth-ab12
		id := name[strings.LastIndex(name, "-")+1:]
		if left, _ := netns.List(runid.Prefix + id + "-"); len(left) > 0 {
			t.Errorf("lab %s left namespaces after Ctrl-C: %v", name, left)
		}
		if _, err := os.Stat("/run/cnibench/labs/" + name + ".json"); err == nil {
			t.Errorf("lab %s left its state file", name)
		}
	}
}

// The lab's journal: a real SIGKILL while a lab holds
// the host's net.core.rmem_max raised, then `lab clean --id` must put back
// the very bytes the host had. Each test uses a private state directory
// (CNIBENCH_STATE_DIR), so it sees and cleans only its own labs.

const rmemMax = "/proc/sys/net/core/rmem_max"

func readRaw(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// raisedRmem returns a value the lab can raise rmem_max to: not the
// current one.
func raisedRmem(before string) string {
	if strings.TrimSpace(before) == "16777216" {
		return "33554432"
	}
	return "16777216"
}

// rmemTest is the start of a test that has the host's rmem_max raised
// (host-wide, as root): the binary, rmem_max as it is, and a higher value.
func rmemTest(t *testing.T) (bin, before, want string) {
	testns.HostWide(t)
	testns.NeedRoot(t)
	before = readRaw(t, rmemMax)
	return testns.Binary(t), before, raisedRmem(before)
}

// journalIDs are the run ids of the lab journals in stateRoot (named
// <time>-<id>.jsonl): those of a lab killed before its state file named
// them too.
func journalIDs(stateRoot string) map[string]bool {
	ids := map[string]bool{}
	ents, _ := os.ReadDir(filepath.Join(stateRoot, "labs", "journal"))
	for _, e := range ents {
		if base, ok := strings.CutSuffix(e.Name(), ".jsonl"); ok {
			if id := base[strings.LastIndex(base, "-")+1:]; runid.Valid(id) {
				ids[id] = true
			}
		}
	}
	return ids
}

// killedLabEnv is a private state directory and, on every path out of the
// test, `lab clean --id` of each lab id it holds; should that fail to put
// rmem_max back, the test fails (it never writes the host's value itself).
func killedLabEnv(t *testing.T, bin, before string) (stateRoot string, env []string) {
	stateRoot = filepath.Join(t.TempDir(), "state")
	env = append(os.Environ(), "CNIBENCH_STATE_DIR="+stateRoot)
	t.Cleanup(func() {
		for id := range killedIDs(stateRoot) {
			if out, err := labClean(bin, env, id); err != nil {
				t.Errorf("cleanup: lab clean --id %s: %v\n%s", id, err, out)
			}
		}
		if now := readRaw(t, rmemMax); now != before {
			t.Errorf("cleanup: rmem_max %q, want %q", now, before)
		}
	})
	return stateRoot, env
}

func cnibench(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	c := exec.Command(bin, args...)
	c.Env = env
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("cnibench %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// killedIDs are the ids of the labs in the private state directory stateRoot,
// named by a state file or only by a journal.
func killedIDs(stateRoot string) map[string]bool {
	ids := labIDs(filepath.Join(stateRoot, "labs"))
	for id := range journalIDs(stateRoot) {
		ids[id] = true
	}
	return ids
}

// labClean runs `lab clean --id id` with env (the test's state directory).
func labClean(bin string, env []string, id string) ([]byte, error) {
	c := exec.Command(bin, "lab", "clean", "--id", id)
	c.Env = env
	return c.CombinedOutput()
}

// onlyID is the one lab id in the private state directory.
func onlyID(t *testing.T, stateRoot string) string {
	t.Helper()
	ids := killedIDs(stateRoot)
	if len(ids) != 1 {
		t.Fatalf("want one lab id in %s, found %v", stateRoot, ids)
	}
	for id := range ids {
		return id
	}
	return ""
}

// A `cnibench run` SIGKILLed while an arm's lab holds rmem_max raised on
// the host: `tune status` shows the change and whose it is, the kill leaves
// it raised, and `lab clean --id` restores the host byte for byte and
// leaves no namespace of the run.
func TestPrivRunKilledRestoresRmemMax(t *testing.T) {
	bin, before, want := rmemTest(t)
	stateRoot, env := killedLabEnv(t, bin, before)
	becomeSubreaper(t)
	dir := t.TempDir()
	exp := filepath.Join(dir, "big-buffers.yaml")
	if err := os.WriteFile(exp, []byte(fmt.Sprintf(`
name: big-buffers
tests: [tcp_lat]
duration: 20s
warmup: 0s
repeats: 1
arms:
  - name: big
    topology: veth
    knobs: {rmem_max: "%s"}
`, want)), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	run := exec.Command(bin, "run", exp, "--db", filepath.Join(dir, "r.db"), "--format", "none")
	run.Stdout, run.Stderr, run.Env = &out, &out, env
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = run.Process.Signal(unix.SIGKILL)
			_ = run.Wait()
		}
	})
	// The runner builds a host-changing lab once to check it, takes it
	// down, then builds it for its step: wait until the value has held
	// for half a second, i.e. the 20 s step is under way.
	deadline := time.Now().Add(30 * time.Second)
	var since time.Time
	for {
		if time.Now().After(deadline) {
			t.Fatalf("rmem_max never held %s for 500 ms within 30 s; run output:\n%s", want, out.String())
		}
		if strings.TrimSpace(readRaw(t, rmemMax)) == want {
			if since.IsZero() {
				since = time.Now()
			}
			if time.Since(since) > 500*time.Millisecond {
				break
			}
		} else {
			since = time.Time{}
		}
		time.Sleep(5 * time.Millisecond)
	}
	id := onlyID(t, stateRoot)
	status := cnibench(t, bin, env, "tune", "status")
	if !strings.Contains(status, "(id "+id+", ") || !strings.Contains(status, "net.core.rmem_max") ||
		!strings.Contains(status, strings.TrimSpace(before)+" -> "+want) {
		t.Errorf("tune status does not show the running lab's change (id %s):\n%s", id, status)
	}
	_ = run.Process.Signal(unix.SIGKILL)
	_ = run.Wait()
	killed = true
	if now := strings.TrimSpace(readRaw(t, rmemMax)); now != want {
		t.Fatalf("rmem_max %s right after the kill, want %s still raised", now, want)
	}
	cleaned := cnibench(t, bin, env, "lab", "clean", "--id", id)
	if after := readRaw(t, rmemMax); after != before {
		t.Fatalf("rmem_max %q after lab clean --id %s, want %q\n%s", after, id, before, cleaned)
	}
	if nss, _ := netns.List(runid.Prefix + id + "-"); len(nss) > 0 {
		t.Errorf("namespaces left after lab clean: %v", nss)
	}
	t.Logf("while the run was up, tune status said:\n%s\nafter the kill, lab clean --id %s said:\n%s", status, id, cleaned)
	if status := cnibench(t, bin, env, "tune", "status"); strings.Contains(status, id) {
		t.Errorf("tune status still shows lab %s after lab clean:\n%s", id, status)
	}
	reapZombies()
}

// `lab up` SIGKILLed after its host change, while it is still applying the
// other knobs: its state file says incomplete, and `lab clean --id`
// restores rmem_max byte for byte.
func TestPrivLabUpKilledAfterHostChange(t *testing.T) {
	bin, before, want := rmemTest(t)
	// 100 pods with offloads off: ~200 journaled ethtool changes come after
	// the host's rmem_max, which is applied first.
	topo := filepath.Join(t.TempDir(), "bridge2x50.yaml")
	if err := os.WriteFile(topo, []byte("topology: bridge\nnodes: 2\npods_per_node: 50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for try := 1; ; try++ {
		stateRoot, env := killedLabEnv(t, bin, before)
		up := exec.Command(bin, "lab", "up", topo, "--set", "rmem_max="+want, "--set", "offloads=off", "-q")
		up.Env = env
		if err := up.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for strings.TrimSpace(readRaw(t, rmemMax)) != want && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
		_ = up.Process.Signal(unix.SIGKILL)
		_ = up.Wait()
		if strings.TrimSpace(readRaw(t, rmemMax)) != want {
			t.Fatalf("rmem_max never became %s while lab up ran", want)
		}
		id := onlyID(t, stateRoot)
		var st struct {
			Complete bool   `json:"complete"`
			Journal  string `json:"journal"`
		}
		labs, _ := filepath.Glob(filepath.Join(stateRoot, "labs", "*.json"))
		if len(labs) != 1 {
			t.Fatalf("state files %v", labs)
		}
		if b, err := os.ReadFile(labs[0]); err != nil || json.Unmarshal(b, &st) != nil || st.Journal == "" {
			t.Fatalf("state file %s: %s %v", labs[0], b, err)
		}
		cleaned := cnibench(t, bin, env, "lab", "clean", "--id", id)
		if after := readRaw(t, rmemMax); after != before {
			t.Fatalf("rmem_max %q after lab clean --id %s, want %q\n%s", after, id, before, cleaned)
		}
		if nss, _ := netns.List(runid.Prefix + id + "-"); len(nss) > 0 {
			t.Errorf("namespaces left after lab clean: %v", nss)
		}
		if !st.Complete {
			t.Logf("try %d: lab up killed mid-way with rmem_max at %s; lab clean --id %s:\n%s", try, want, id, cleaned)
			return
		}
		if try == 3 {
			t.Fatal("lab up finished before the kill three times: no kill landed after the host change")
		}
	}
}

// The chaos tier: `cnibench run` and `cnibench tune apply` are SIGKILLed at
// random moments; `cnibench lab clean --id` and `cnibench tune rollback` must
// then leave the host exactly as it was, and the results database must hold
// every sample the run reported as stored. CNIBENCH_CHAOS_KILLS overrides
// the number of kills (default 20 runs, 10 applies).

// hostSnapshot is what a run may change on the host and must restore: the
// host namespace's net.core and net.ipv4 sysctls byte for byte, hugepages,
// and every cnb- object of the given lab ids.
type hostSnapshot struct {
	sysctls map[string]string
	objects []string
}

func snapshotHost(t *testing.T, ids map[string]bool, stateDir string) hostSnapshot {
	t.Helper()
	s := hostSnapshot{sysctls: map[string]string{}}
	for _, dir := range []string{"/proc/sys/net/core", "/proc/sys/net/ipv4"} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if b, err := os.ReadFile(p); err == nil {
				s.sysctls[p] = string(b)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/vm/nr_hugepages"); err == nil {
		s.sysctls["/proc/sys/vm/nr_hugepages"] = string(b)
	}
	ours := func(name string) bool {
		id, _, ok := runid.Parse(name)
		return ok && ids[id]
	}
	nss, _ := netns.List(runid.Prefix)
	for _, n := range nss {
		if ours(n) {
			s.objects = append(s.objects, "netns "+n)
		}
	}
	links, _ := netlink.LinkList()
	for _, l := range links {
		if ours(l.Attrs().Name) {
			s.objects = append(s.objects, "link "+l.Attrs().Name)
		}
	}
	if c, err := nftables.New(); err == nil {
		tables, _ := c.ListTables()
		for _, tb := range tables {
			if ours(tb.Name) {
				s.objects = append(s.objects, "nft table "+tb.Name)
			}
		}
	}
	if stateDir != "" {
		for id := range labIDs(stateDir) {
			if ids[id] {
				s.objects = append(s.objects, "lab state of "+id)
			}
		}
		// Private OVS/OVN daemons (their run directories are under the
		// state root) and DPDK runtime directories.
		for id := range ids {
			dir := filepath.Join(filepath.Dir(stateDir), "ovs", runid.Prefix+id+"-")
			for _, pid := range processesNaming(dir) {
				s.objects = append(s.objects, "process "+cmdlines([]int{pid}))
			}
		}
	}
	if ents, err := os.ReadDir("/var/run/dpdk"); err == nil {
		for _, e := range ents {
			if ours(e.Name()) {
				s.objects = append(s.objects, "dpdk runtime directory "+e.Name())
			}
		}
	}
	sort.Strings(s.objects)
	return s
}

// processesNaming lists the running processes (zombies left out) whose
// command line contains s.
func processesNaming(s string) []int {
	return driver.Procs("cmdline", func(pid int, cmdline []byte) bool {
		if pid == os.Getpid() || !bytes.Contains(cmdline, []byte(s)) {
			return false
		}
		// A zombie's state, after the command name's ')', is Z.
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i := bytes.LastIndexByte(st, ')')
		return !(i > 0 && i+2 < len(st) && st[i+2] == 'Z')
	})
}

func (s hostSnapshot) diff(after hostSnapshot) []string {
	var d []string
	for p, v := range s.sysctls {
		if w, ok := after.sysctls[p]; !ok || w != v {
			d = append(d, fmt.Sprintf("%s: %q before, %q after", p, strings.TrimSpace(v), strings.TrimSpace(w)))
		}
	}
	for _, o := range after.objects {
		d = append(d, "left behind: "+o)
	}
	sort.Strings(d)
	return d
}

// labIDs are the run ids of the labs whose state (or name reservation)
// files are in dir: a private state directory, so only the killed run's labs
// are counted, never those of tests running beside this one.
func labIDs(dir string) map[string]bool {
	ids := map[string]bool{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		// Lab names are <topology>-<id>; a reservation has only its name.
		if id := name[strings.LastIndex(name, "-")+1:]; runid.Valid(id) {
			ids[id] = true
		}
	}
	return ids
}

// orphans are the live processes running bin whose parent is this test
// process: with the test a child subreaper, every process a killed run left
// running is re-parented here, so this finds exactly the run's leftovers and
// never a process of a test running beside this one.
func orphans(bin string) []int {
	return driver.Procs("status", func(pid int, status []byte) bool {
		if !strings.Contains(string(status), fmt.Sprintf("\nPPid:\t%d\n", os.Getpid())) {
			return false
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return err == nil && exe == bin
	})
}

// cmdlines names processes by pid and command line.
func cmdlines(pids []int) string {
	var out []string
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("%d %q", pid, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")))
	}
	return strings.Join(out, ", ")
}

// becomeSubreaper makes orphans of this process's children its own, and
// reaps them when the test ends.
func becomeSubreaper(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	t.Cleanup(func() {
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		reapZombies()
	})
}

// reapZombies collects the exit status of every finished orphan; called
// only when the test waits on no child of its own.
func reapZombies() {
	for {
		var ws unix.WaitStatus
		if pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); pid <= 0 || err != nil {
			return
		}
	}
}

func chaosKills(def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("CNIBENCH_CHAOS_KILLS"), &n); err == nil && n > 0 {
		return n
	}
	return def
}

var storedRE = regexp.MustCompile(`(?m)^\[(\d+)/\d+\]`)

func TestPrivChaosRunKilled(t *testing.T) {
	testns.HostWide(t)
	// A lab that stays up (veth), one with nftables state (vxlan with
	// conntrack and service rules), one that raises a host-wide setting
	// for its own steps only (rmem_max), and real OVN (nine daemons in the
	// lab's namespaces, private databases and run directories, a load
	// balancer): a kill can land in any of their builds, measurements and
	// teardowns.
	arms := `
  - name: veth
    topology: veth
  - name: vxlan
    topology: vxlan
    knobs: {conntrack: "on", services: "20"}
  - name: big-buffers
    topology: veth
    knobs: {rmem_max: "16777216", wmem_max: "16777216"}`
	window := 3 * time.Second
	if _, err := exec.LookPath("ovn-northd"); err == nil {
		arms += `
  - name: ovn
    topology: ovn-overlay
    knobs: {services: "20"}`
		window = 12 * time.Second
	} else {
		t.Log("no OVN here (scripts/install-deps.sh installs ovn-central ovn-host): the chaos run has no OVN arm")
	}
	bin, dir, exp := privExperiment(t, `
name: chaos
tests: [tcp_lat, udp_bw]
duration: 200ms
warmup: 50ms
repeats: 2
arms:`+arms+"\n")
	db := filepath.Join(dir, "r.db")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	stateRoot := filepath.Join(dir, "state")
	labState := filepath.Join(stateRoot, "labs")
	env := append(os.Environ(), "CNIBENCH_STATE_DIR="+stateRoot)
	// Whatever a failing trial left is removed even when the test stops.
	t.Cleanup(func() {
		for id := range labIDs(labState) {
			_, _ = labClean(bin, env, id)
		}
	})
	becomeSubreaper(t)
	kills := chaosKills(20)
	for i := 0; i < kills; i++ {
		snap := snapshotHost(t, map[string]bool{}, "")
		var out bytes.Buffer
		cmd := exec.Command(bin, "run", exp, "--db", db, "--format", "none")
		cmd.Stdout, cmd.Stderr, cmd.Env = &out, &out, env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The whole run takes ~4 s here; kill anywhere in its first 3 s.
		// With the OVN arm it takes ~14 s on this 2-vCPU VM (its first
		// step ~4 s in, after the labs and the wake-up calibration): kill
		// anywhere in its first 12 s.
		time.Sleep(time.Duration(rng.Int64N(int64(window))))
		_ = cmd.Process.Signal(unix.SIGKILL)
		_ = cmd.Wait()
		reported := 0
		for _, m := range storedRE.FindAllStringSubmatch(out.String(), -1) {
			fmt.Sscan(m[1], &reported)
		}
		// What the kill left: every lab id that was not there before.
		ids := labIDs(labState)
		// What the kill left before cleaning, for the log: proof that the
		// kills land while the host is changed, not only between runs.
		dirty := snap.diff(snapshotHost(t, ids, labState))
		orphaned := len(orphans(bin))
		for id := range ids {
			if co, err := labClean(bin, env, id); err != nil {
				t.Fatalf("kill %d: lab clean --id %s: %v\n%s", i, id, err, co)
			}
		}
		after := snapshotHost(t, ids, labState)
		if d := snap.diff(after); len(d) > 0 {
			t.Fatalf("kill %d (after %d stored steps): the host differs after lab clean:\n  %s\nrun output:\n%s", i, reported, strings.Join(d, "\n  "), out.String())
		}
		// A process SIGKILLed by its parent's death (the wake-up spinner's
		// PR_SET_PDEATHSIG) is gone once the kernel runs it, which at
		// SCHED_IDLE on a busy host can take a moment: allow 3 s, then
		// name what is still running.
		left := orphans(bin)
		for w := 0; w < 30 && len(left) > 0; w++ {
			time.Sleep(100 * time.Millisecond)
			left = orphans(bin)
		}
		if len(left) > 0 {
			t.Fatalf("kill %d: cnibench processes the killed run left are still running 3 s after lab clean: %s", i, cmdlines(left))
		}
		reapZombies()
		checkDB(t, db, reported, i)
		t.Logf("kill %d: %d steps stored before the kill; it left %d differences (%s) and %d running cnibench processes, all undone by lab clean", i, reported, len(dirty), brief(dirty), orphaned)
	}
}

// checkDB: the database passes SQLite's integrity check and its last run
// holds at least the samples the run reported as stored.
func checkDB(t *testing.T, path string, reported, i int) {
	t.Helper()
	if _, err := os.Stat(path); os.IsNotExist(err) {
		if reported > 0 {
			t.Fatalf("kill %d: %d steps reported stored, no database", i, reported)
		}
		return
	}
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	var ok string
	if err := raw.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("kill %d: integrity_check: %q %v", i, ok, err)
	}
	raw.Close()
	_, samples, err := lastRun(t, path)
	if err != nil {
		if reported > 0 {
			t.Fatalf("kill %d: %d steps reported stored, no run: %v", i, reported, err)
		}
		return
	}
	if len(samples) < reported {
		t.Fatalf("kill %d: %d steps reported stored, %d in the database", i, reported, len(samples))
	}
}

// lastRun opens the results database at path and reads its last run and
// that run's samples; err is GetRun's, for a database that may hold none.
func lastRun(t *testing.T, path string) (*store.Run, []store.Sample, error) {
	t.Helper()
	s, err := store.Open(path)
	if err != nil {
		t.Fatalf("open results: %v", err)
	}
	defer s.Close()
	run, err := s.GetRun("last")
	if err != nil {
		return nil, nil, err
	}
	samples, err := s.Samples(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return run, samples, nil
}

func brief(d []string) string {
	var host, objs int
	for _, x := range d {
		if strings.HasPrefix(x, "left behind") {
			objs++
		} else {
			host++
		}
	}
	return fmt.Sprintf("%d sysctls, %d objects", host, objs)
}

// nsSysctls reads the net.core and net.ipv4 sysctls as the named namespace
// sees them.
func nsSysctls(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := netns.Do(ns, func() error {
		for _, dir := range []string{"/proc/sys/net/core", "/proc/sys/net/ipv4"} {
			ents, err := os.ReadDir(dir)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if !e.IsDir() {
					if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
						out[filepath.Join(dir, e.Name())] = string(b)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPrivChaosTuneApplyKilled(t *testing.T) {
	testns.HostWide(t)
	testns.NeedRoot(t)
	bin := testns.Binary(t)
	ns := runid.Name(runid.New(), "chaos")
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(ns) })
	host := snapshotHost(t, map[string]bool{}, "")
	want := nsSysctls(t, ns)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	kills := chaosKills(10)
	changedSome := 0
	for i := 0; i < kills; i++ {
		dir := t.TempDir()
		profile := []string{"latency", "throughput"}[i%2]
		cmd := exec.Command(bin, "tune", "apply", "--profile", profile, "--scope", "netns:"+ns, "--journal-dir", dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// apply takes a few ms: kill anywhere in its first 40 ms (some
		// kills land after it finished, which must be undone as well).
		time.Sleep(time.Duration(rng.Int64N(int64(40 * time.Millisecond))))
		_ = cmd.Process.Signal(unix.SIGKILL)
		_ = cmd.Wait()
		if got := nsSysctls(t, ns); fmt.Sprint(got) != fmt.Sprint(want) {
			changedSome++
		}
		if co, err := exec.Command(bin, "tune", "rollback", "--journal-dir", dir).CombinedOutput(); err != nil && !strings.Contains(string(co), "nothing to roll back") {
			t.Fatalf("kill %d: tune rollback: %v\n%s", i, err, co)
		}
		got := nsSysctls(t, ns)
		for p, v := range want {
			if got[p] != v {
				t.Fatalf("kill %d (%s): %s is %q after rollback, was %q", i, profile, p, strings.TrimSpace(got[p]), strings.TrimSpace(v))
			}
		}
		if d := host.diff(snapshotHost(t, map[string]bool{}, "")); len(d) > 0 {
			t.Fatalf("kill %d: a namespace-scoped apply changed the host: %v", i, d)
		}
	}
	t.Logf("%d kills, %d of them left the namespace changed before rollback", kills, changedSome)
}
