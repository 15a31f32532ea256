package cli

import (
	"bytes"
	"database/sql"
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
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite"
)

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
	}
	sort.Strings(s.objects)
	return s
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
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil || !strings.Contains(string(b), fmt.Sprintf("\nPPid:\t%d\n", os.Getpid())) {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == bin {
			out = append(out, pid)
		}
	}
	return out
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
	// conntrack and service rules), and one that raises a host-wide
	// setting for its own steps only (rmem_max): a kill can land in any of
	// their builds, measurements and teardowns.
	bin, dir, exp := privExperiment(t, `
name: chaos
tests: [tcp_lat, udp_bw]
duration: 200ms
warmup: 50ms
repeats: 2
arms:
  - name: veth
    topology: veth
  - name: vxlan
    topology: vxlan
    knobs: {conntrack: "on", services: "20"}
  - name: big-buffers
    topology: veth
    knobs: {rmem_max: "16777216", wmem_max: "16777216"}
`)
	db := filepath.Join(dir, "r.db")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	stateRoot := filepath.Join(dir, "state")
	labState := filepath.Join(stateRoot, "labs")
	env := append(os.Environ(), "CNIBENCH_STATE_DIR="+stateRoot)
	// Whatever a failing trial left is removed even when the test stops.
	t.Cleanup(func() {
		for id := range labIDs(labState) {
			c := exec.Command(bin, "lab", "clean", "--id", id)
			c.Env = env
			_ = c.Run()
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
		time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Second))))
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
			clean := exec.Command(bin, "lab", "clean", "--id", id)
			clean.Env = env
			if co, err := clean.CombinedOutput(); err != nil {
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
	s, err := store.Open(path)
	if err != nil {
		t.Fatalf("kill %d: open results: %v", i, err)
	}
	defer s.Close()
	run, err := s.GetRun("last")
	if err != nil {
		if reported > 0 {
			t.Fatalf("kill %d: %d steps reported stored, no run: %v", i, reported, err)
		}
		return
	}
	samples, err := s.Samples(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) < reported {
		t.Fatalf("kill %d: %d steps reported stored, %d in the database", i, reported, len(samples))
	}
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
