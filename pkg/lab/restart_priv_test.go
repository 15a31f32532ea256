package lab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/testns"
)

// TestPrivOVNRestart restarts every daemon an OVN lab runs privately, on
// both presets: each time the old process is gone and a new one runs
// with the same command line, the instants are in order, the state file
// names the new pid, and when Restart returns both switches hold at least
// as many OpenFlow flows as before (counted by ovs-ofctl, apart from the
// rule count Restart waits on), both ovn-controllers are connected to the
// southbound database, ovn-northd is active, and traffic crosses the
// nodes both ways.
func TestPrivOVNRestart(t *testing.T) {
	onOVNPresets(t, func(t *testing.T, preset string, l *Lab) {
		port := 17600
		for _, tc := range []struct {
			d    PrivateDaemon
			node int
		}{{OVNController, 2}, {OVNController, 1}, {OVNNorthd, 0}, {OVNNorthbound, 0}, {OVNSouthbound, 0}, {Vswitchd, 2}, {Vswitchd, 1}} {
			// Read before each restart: a fresh ovn-underlay lab may
			// still be adding a few flows (300, then 304 here).
			flows := map[string]int{"node1": ofFlowCount(t, l, "node1"), "node2": ofFlowCount(t, l, "node2")}
			old := daemonOf(t, l, tc.d, tc.node)
			oldArgs, _, err := procArgs(old.PID)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := l.Restart(context.Background(), tc.d, tc.node)
			if err != nil {
				t.Fatalf("restart %s %d: %v", tc.d, tc.node, err)
			}
			t.Logf("%s node %d: gone %v, started %v, back %v after SIGTERM; CPU %v",
				tc.d, tc.node, rs.Exited.Sub(rs.Killed), rs.Started.Sub(rs.Killed), rs.Back.Sub(rs.Killed), rs.CPU)
			// Back is checked first: every later check takes time the
			// lab could use to catch up.
			for node, want := range flows {
				if n := ofFlowCount(t, l, node); n < want {
					t.Errorf("%s %d: %s holds %d OpenFlow flows when the restart is over, %d before", tc.d, tc.node, node, n, want)
				}
			}
			if procAlive(old.PID) || rs.Daemon.PID == old.PID || rs.Daemon.PID != daemonOf(t, l, tc.d, tc.node).PID {
				t.Errorf("%s %d: old pid %d alive %v, new %d", tc.d, tc.node, old.PID, procAlive(old.PID), rs.Daemon.PID)
			}
			if args, _, err := procArgs(rs.Daemon.PID); err != nil || strings.Join(args, " ") != strings.Join(oldArgs, " ") {
				t.Errorf("%s %d: command line %q, was %q (%v)", tc.d, tc.node, args, oldArgs, err)
			}
			if !(rs.Killed.Before(rs.Exited) && !rs.Started.Before(rs.Exited) && !rs.Back.Before(rs.Started)) || rs.CPU <= 0 {
				t.Errorf("%s %d: instants out of order or no CPU: %+v", tc.d, tc.node, rs)
			}
			if err := l.Health(); err != nil {
				t.Errorf("%s %d: %v", tc.d, tc.node, err)
			}
			saved, err := Get(l.Name)
			if err != nil || !hasDaemonPID(saved, rs.Daemon.PID) {
				t.Errorf("%s %d: state file does not name pid %d (%v)", tc.d, tc.node, rs.Daemon.PID, err)
			}
			for _, node := range []string{"node1", "node2"} {
				pid := daemonOf(t, l, OVNController, int(node[4]-'0')).PID
				ctl := filepath.Join(ovnDir(t, l, node), fmt.Sprintf("ovn-controller.%d.ctl", pid))
				if st := strings.TrimSpace(appctl(t, ctl, "connection-status")); st != "connected" {
					t.Errorf("%s %d: %s's ovn-controller: %q, want connected", tc.d, tc.node, node, st)
				}
			}
			if st := appctl(t, filepath.Join(ovnDir(t, l, "central"), "ovn-northd.ctl"), "status"); !strings.Contains(st, "Status: active") {
				t.Errorf("%s %d: ovn-northd %q, want active", tc.d, tc.node, st)
			}
			echoPairs(t, l, port, [2]string{"client", "server"})
			port += 2
		}
	})
}

// TestPrivOVNRestartInterrupted: a restart whose context is cancelled
// once the old daemon is killed still starts the new one (the lab stays
// whole) and returns the context's error.
func TestPrivOVNRestartInterrupted(t *testing.T) {
	testns.HostWide(t)
	needBuildable(t, TopoOVNOverlay)
	privateState(t)
	l := upLab(t, presetWith(t, TopoOVNOverlay, nil))
	old := daemonOf(t, l, OVNController, 2)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for procAlive(old.PID) {
			time.Sleep(100 * time.Microsecond)
		}
		cancel()
	}()
	rs, err := l.Restart(ctx, OVNController, 2)
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled restart: %v, want context.Canceled", err)
	}
	if rs.Daemon.PID == 0 || rs.Daemon.PID == old.PID || !procAlive(rs.Daemon.PID) {
		t.Fatalf("cancelled restart: new daemon %+v, old pid %d", rs.Daemon, old.PID)
	}
	if err := l.Health(); err != nil {
		t.Error(err)
	}
	echoPairs(t, l, 17650, [2]string{"client", "server"})
}

// TestPrivRestartRefused: a lab that does not run the daemon privately
// refuses the restart before touching anything.
func TestPrivRestartRefused(t *testing.T) {
	testns.NeedRoot(t)
	privateState(t)
	l := upLab(t, presetWith(t, TopoVeth, nil))
	for _, d := range RestartableDaemons() {
		if _, err := l.Restart(context.Background(), d, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s on veth: %v, want ErrInvalid", d, err)
		}
	}
}

// daemonOf is l's recorded daemon d (of node, for a per-node one).
func daemonOf(t *testing.T, l *Lab, d PrivateDaemon, node int) Daemon {
	t.Helper()
	name, where := string(d), "central"
	switch d {
	case OVNNorthbound, OVNSouthbound:
		name, where = "ovsdb-server", map[PrivateDaemon]string{OVNNorthbound: "central (nb)", OVNSouthbound: "central (sb)"}[d]
	case OVNController, Vswitchd:
		where = fmt.Sprintf("node%d", node)
	}
	for _, x := range l.Daemons {
		if x.Name == name && x.Where == where {
			return x
		}
	}
	t.Fatalf("no %s of %s among %v", name, where, l.Daemons)
	return Daemon{}
}

func hasDaemonPID(l *Lab, pid int) bool {
	for _, d := range l.Daemons {
		if d.PID == pid {
			return true
		}
	}
	return false
}

// appctl runs ovn-appctl against a daemon's control socket.
func appctl(t *testing.T, ctl string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ovn-appctl", append([]string{"--timeout=5", "-t", ctl}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ovn-appctl -t %s %v: %v: %s", ctl, args, err, out)
	}
	return string(out)
}

// ofFlowCount is how many OpenFlow flows node's integration bridge holds
// (ovs-ofctl dump-aggregate through the bridge's management socket).
func ofFlowCount(t *testing.T, l *Lab, node string) int {
	t.Helper()
	mgmt := "unix:" + filepath.Join(ovnDir(t, l, node), mustIf(l.ID, "int")+".mgmt")
	out, err := exec.Command("ovs-ofctl", "dump-aggregate", mgmt).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-ofctl dump-aggregate %s: %v: %s", mgmt, err, out)
	}
	_, v, ok := strings.Cut(string(out), "flow_count=")
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if !ok || err != nil {
		t.Fatalf("ovs-ofctl dump-aggregate %s: no flow_count in %q", mgmt, out)
	}
	return n
}
