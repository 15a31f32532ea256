package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
	"golang.org/x/sys/unix"
)

// End-to-end tests of the lab's journal: a real SIGKILL while a lab holds
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
		ids := labIDs(filepath.Join(stateRoot, "labs"))
		for id := range journalIDs(stateRoot) {
			ids[id] = true
		}
		for id := range ids {
			c := exec.Command(bin, "lab", "clean", "--id", id)
			c.Env = env
			if out, err := c.CombinedOutput(); err != nil {
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

// onlyID is the one lab id in the private state directory.
func onlyID(t *testing.T, stateRoot string) string {
	t.Helper()
	ids := labIDs(filepath.Join(stateRoot, "labs"))
	for id := range journalIDs(stateRoot) {
		ids[id] = true
	}
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
