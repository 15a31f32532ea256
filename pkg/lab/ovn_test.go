package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/ovsdb"
)

// Knobs that are fine alone and refused together, each with one line
// saying why; and the combinations the refusals must not catch.
func TestOVNKnobCombinations(t *testing.T) {
	for _, c := range []struct {
		topo  string
		knobs map[string]string
		want  string // "" = accepted
	}{
		{TopoOVNUnderlay, map[string]string{"dpdk": "on", "mtu": "1501"}, "knob mtu: at most 1500 with dpdk=on"},
		{TopoOVNUnderlay, map[string]string{"dpdk": "on", "mtu": "1500"}, ""},
		{TopoOVNOverlay, map[string]string{"tunnel": "vxlan", "mtu": "1450"}, ""},
		{TopoOVNOverlay, map[string]string{"tunnel": "vxlan", "mtu": "1451"}, "at most 1450 on ovn-overlay with tunnel=vxlan"},
		{TopoOVNOverlay, map[string]string{"underlay_mtu": "9000", "mtu": "8942"}, ""},
		{TopoOVNOverlay, map[string]string{"skip_conntrack": "10.16.0.0/16", "policies": "3"}, "knob skip_conntrack: not with policies"},
		{TopoOVNOverlay, map[string]string{"skip_conntrack": "10.16.0.0/16", "policies": "0"}, ""},
		{TopoOVNOverlay, map[string]string{"dpdk": "off", "pmd_sleep": "0"}, "knob pmd_sleep: needs dpdk=on"},
		{TopoOVSDPDK, map[string]string{"pmd_sleep": "0"}, ""},
		{TopoOVNOverlay, map[string]string{"dpdk": "on", "pmd_sleep": "0", "pmd_cpus": "0"}, ""},
	} {
		s, err := Resolve(c.topo, "", c.knobs)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %v: %v", c.topo, c.knobs, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || !errors.Is(err, ErrInvalid)):
			t.Errorf("%s %v: want one ErrInvalid line with %q, got %v", c.topo, c.knobs, c.want, err)
		case err == nil && c.knobs["dpdk"] == "on" && (s.DPDK == nil || s.DPDK.MemoryMB != ovnDPDKMemoryMB || s.DPDK.Hugepages != 0):
			t.Errorf("%s %v: DPDK spec %+v, want no hugepages", c.topo, c.knobs, s.DPDK)
		}
	}
}

// The northbound transaction of a lab with every knob: Kube-OVN's objects,
// each referenced by what needs it, and nothing the lab did not ask for.
func TestOVNNorthbound(t *testing.T) {
	count := func(ops []ovsdb.Op) map[string]int {
		n := map[string]int{}
		for _, o := range ops {
			n[o["table"].(string)]++
		}
		return n
	}
	plain, _ := Preset(TopoOVNOverlay)
	if got := count(ovnNorthbound(plain, makeLayout(plain, "zz99"))); got["Logical_Switch"] != 1 || got["Logical_Switch_Port"] != 5 ||
		got["Load_Balancer"] != 0 || got["ACL"] != 0 || got["Port_Group"] != 0 || got["Logical_Router_Port"] != 1 {
		t.Errorf("plain overlay: %v", got)
	}
	under, _ := Resolve(TopoOVNUnderlay, "", map[string]string{"router": "on", "services": "10000", "skip_conntrack": "10.16.0.0/16,10.17.0.0/16"})
	ops := ovnNorthbound(under, makeLayout(under, "zz99"))
	got := count(ops)
	// 2 router ports, localnet, 6 pods (4 + routed1, routed2); 6 load
	// balancers; 2 CIDRs on each of 2 switches.
	if got["Logical_Switch"] != 2 || got["Logical_Switch_Port"] != 9 || got["Load_Balancer"] != 6 || got["ACL"] != 4 || got["Logical_Router_Port"] != 2 {
		t.Errorf("underlay with every knob: %v", got)
	}
	for _, o := range ops {
		row := o["row"].(map[string]any)
		if row["name"] == "cluster-tcp-loadbalancer" {
			pairs := row["vips"].([]any)[1].([]any)
			if len(pairs) != 10000 {
				t.Errorf("%d TCP VIPs, want 10000", len(pairs))
			}
		}
		if row["name"] == "localnet.ovn-default" && row["type"] != "localnet" {
			t.Errorf("localnet port %v", row)
		}
	}
	pol, _ := Resolve(TopoOVNOverlay, "", map[string]string{"policies": "5"})
	if got := count(ovnNorthbound(pol, makeLayout(pol, "zz99"))); got["ACL"] != 6 || got["Address_Set"] != 10 || got["Port_Group"] != 1 {
		t.Errorf("5 linear policies: %v", got)
	}
}

// The log line a dead daemon is reported with: its last error, or else
// its last line, said to be only that.
func TestLastLogLine(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	crash := write("a.log", "2026-11-26T20:00:00Z|00001|vlog|INFO|opened log file\n"+
		"2026-11-26T20:00:01Z|00002|conntrack|EMER|conntrack.c:1063: assertion conn->conn_type == CT_CONN_TYPE_DEFAULT failed in conn_update_state()\n")
	if line, isErr := lastLogLine(crash); !isErr || !strings.Contains(line, "assertion conn->conn_type") {
		t.Errorf("assertion: %q %v", line, isErr)
	}
	quiet := write("b.log", "x|INFO|one\nx|INFO|two\n")
	if line, isErr := lastLogLine(quiet); isErr || line != "x|INFO|two" {
		t.Errorf("no error: %q %v", line, isErr)
	}
	e := &DaemonError{Daemon: Daemon{Name: "ovs-vswitchd", Where: "node2", PID: 7}, LogLine: "x|INFO|two"}
	if got := e.Error(); got != "ovs-vswitchd of node2 (pid 7) exited with no error in its log (killed by a signal?); its last line: x|INFO|two" {
		t.Errorf("message %q", got)
	}
	if line, isErr := lastLogLine(dir + "/none.log"); line != "" || isErr {
		t.Errorf("missing log: %q", line)
	}
}

// A daemon that dies while the lab waits for readiness ends the wait at
// once, named, instead of the wait running out its time.
func TestWatchDaemons(t *testing.T) {
	dir := t.TempDir()
	// A stand-in daemon whose command line names its run directory.
	cmd := exec.Command("sh", "-c", "sleep 30", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	// Until the child has exec'd, its command line is still this test's:
	// wait for sh's (a loaded host took long enough for Health to look).
	for i := 0; ; i++ {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		if strings.Contains(string(b), dir) {
			break
		}
		if i == 500 {
			t.Fatalf("stand-in daemon's command line never named %s: %q", dir, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	l := &Lab{Daemons: []Daemon{{Name: "ovn-controller", Where: "node1", PID: cmd.Process.Pid, Dir: dir, Log: dir + "/x.log"}}}
	if err := l.Health(); err != nil {
		t.Fatalf("alive: %v", err)
	}
	time.AfterFunc(50*time.Millisecond, func() { _ = cmd.Process.Kill() })
	start := time.Now()
	err := l.watchDaemons(context.Background(), func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("the wait ran out its time")
		}
	})
	var dead *DaemonError
	if !errors.As(err, &dead) || dead.Daemon.Name != "ovn-controller" {
		t.Fatalf("want the daemon's death, got %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("noticed after %v", d)
	}
	if err := l.watchDaemons(context.Background(), func(context.Context) error { return nil }); err == nil {
		t.Error("a dead daemon is not reported by a wait that finished")
	}
}
