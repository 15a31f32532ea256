package cli

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/lab"
	"golang.org/x/sys/unix"
)

// A vswitchd that dies in the middle of a `cnibench run` step (killed as a
// crash would end it): that step is stored as an error naming the daemon,
// its node and its log, the OVN lab is rebuilt and the arm's later steps
// measure again, the other arm is untouched, the run ends with exit 1 and
// nothing of any lab is left.
func TestPrivRunOVNDaemonKilled(t *testing.T) {
	testns.HostWide(t)
	if _, err := exec.LookPath("ovn-northd"); err != nil {
		t.Skip("OVN not installed (scripts/install-deps.sh installs ovn-central ovn-host)")
	}
	// Steps: ovn, veth | veth, ovn | ovn, veth (arm order rotates).
	bin, dir, exp := privExperiment(t, `
name: ovn-crash
tests: [tcp_lat]
duration: 2s
warmup: 200ms
repeats: 3
arms:
  - name: ovn
    topology: ovn-overlay
  - name: veth
    topology: veth
`)
	stateRoot := filepath.Join(dir, "state")
	env := append(os.Environ(), "CNIBENCH_STATE_DIR="+stateRoot)
	t.Cleanup(func() {
		for id := range labIDs(filepath.Join(stateRoot, "labs")) {
			_, _ = labClean(bin, env, id)
		}
	})
	db := filepath.Join(dir, "r.db")
	var out lockedBuffer
	run := exec.Command(bin, "run", exp, "--db", db, "--format", "none")
	run.Stdout, run.Stderr, run.Env = &out, &out, env
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	// Step 4 is the OVN arm's second: kill node2's vswitchd in its middle.
	waitOutput(t, run, &out, "[3/6]", 90*time.Second)
	time.Sleep(900 * time.Millisecond)
	victim := ovnDaemon(t, filepath.Join(stateRoot, "labs"), "ovs-vswitchd", "node2")
	if err := unix.Kill(victim.PID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := run.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("run: %v, want exit 1 (a failed step):\n%s", err, out.String())
	}
	_, samples, err := lastRun(t, db)
	if err != nil || len(samples) != 6 {
		t.Fatalf("stored %d samples (%v):\n%s", len(samples), err, out.String())
	}
	var failed []string
	ok := map[string]int{}
	for _, s := range samples {
		if s.Error != "" {
			failed = append(failed, s.Arm+": "+s.Error)
		} else {
			ok[s.Arm]++
		}
	}
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "ovn: the datapath of lab") ||
		!strings.Contains(failed[0], "ovs-vswitchd of node2") || !strings.Contains(failed[0], "exited") {
		t.Fatalf("failed steps %q, want the OVN arm's step naming node2's vswitchd", failed)
	}
	if ok["ovn"] != 2 || ok["veth"] != 3 {
		t.Errorf("measured steps %v, want ovn 2 (before the kill and on the rebuilt lab) and veth 3", ok)
	}
	if !strings.Contains(out.String(), "rebuilt as") {
		t.Errorf("the run does not say it rebuilt the lab:\n%s", out.String())
	}
	t.Logf("the failed step: %s", failed[0])
	ids := labIDs(filepath.Join(stateRoot, "labs"))
	if len(ids) != 0 {
		t.Errorf("labs left after the run: %v", ids)
	}
	if left := processesNaming(filepath.Join(stateRoot, "ovs")); len(left) > 0 {
		t.Errorf("daemons left after the run: %s", cmdlines(left))
	}
}

// ovnDaemon reads the one OVN lab's state in stateDir and returns its
// daemon name of node where.
func ovnDaemon(t *testing.T, stateDir, name, where string) lab.Daemon {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(stateDir, "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var l lab.Lab
		if json.Unmarshal(b, &l) != nil {
			continue
		}
		for _, d := range l.Daemons {
			if d.Name == name && d.Where == where {
				return d
			}
		}
	}
	t.Fatalf("no %s of %s in the labs of %s (%v)", name, where, stateDir, files)
	return lab.Daemon{}
}
