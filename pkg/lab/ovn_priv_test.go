package lab

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
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

// The OVN presets on this host, for real: traffic both ways on the
// same-node and cross-node paths, the tunnel seen (or not) in the
// datapath's flows, each knob read back from the northbound and
// southbound databases and the flows, DPDK, a killed daemon, a missing
// package, and nothing left on any path out.

// onOVNPresets runs f as a subtest per OVN preset, each on a fresh lab of
// it, where this host can run OVN; it holds the host-wide test lock.
func onOVNPresets(t *testing.T, f func(t *testing.T, preset string, l *Lab)) {
	testns.HostWide(t)
	needBuildable(t, TopoOVNOverlay)
	privateState(t)
	for _, preset := range []string{TopoOVNOverlay, TopoOVNUnderlay} {
		t.Run(preset, func(t *testing.T) { f(t, preset, upLab(t, presetWith(t, preset, nil))) })
	}
}

// ovnDir is the lab's private run directory of role ("central", "node1").
func ovnDir(t *testing.T, l *Lab, role string) string {
	t.Helper()
	for _, d := range l.PrivateOVS {
		if strings.HasSuffix(d, "-"+role) {
			return d
		}
	}
	t.Fatalf("lab %s has no %s directory in %v", l.Name, role, l.PrivateOVS)
	return ""
}

// ovnTool runs ovn-nbctl, ovn-sbctl (against the lab's central databases)
// or ovs-appctl/ovs-vsctl (against a node) — the tools users know, to
// read back what the lab wrote — and returns the output.
func ovnTool(t *testing.T, l *Lab, tool string, args ...string) string {
	t.Helper()
	var argv []string
	switch tool {
	case "ovn-nbctl":
		argv = []string{"ovn-nbctl", "--db=unix:" + filepath.Join(ovnDir(t, l, "central"), "nb.sock")}
	case "ovn-sbctl":
		argv = []string{"ovn-sbctl", "--db=unix:" + filepath.Join(ovnDir(t, l, "central"), "sb.sock")}
	default: // "node1 ovs-appctl …", "node2 ovs-vsctl …"
		node, prog, _ := strings.Cut(tool, " ")
		dir := ovnDir(t, l, node)
		if prog == "ovs-appctl" {
			argv = []string{"ovs-appctl", "-t", unixctl(dir)}
		} else {
			argv = []string{"ovs-vsctl", "--db=unix:" + filepath.Join(dir, "db.sock")}
		}
	}
	out, err := exec.Command(argv[0], append(argv[1:], args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", strings.Join(argv, " "), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// datapathFlows is node n's userspace datapath flows (dpctl/dump-flows).
func datapathFlows(t *testing.T, l *Lab, node string) string {
	return ovnTool(t, l, node+" ovs-appctl", "dpctl/dump-flows")
}

// echoPairs carries TCP and UDP both ways between each pair of endpoints,
// each pair on its own ports.
func echoPairs(t *testing.T, l *Lab, port int, pairs ...[2]string) {
	t.Helper()
	for _, pr := range pairs {
		a, b := l.Endpoints[pr[0]], l.Endpoints[pr[1]]
		for _, d := range [][2]Endpoint{{a, b}, {b, a}} {
			echoBoth(t, d[0].Netns, d[1].Netns, net.JoinHostPort(d[1].IP, fmt.Sprint(port)), 256<<10)
			port++
		}
	}
}

// TestPrivOVNPresets: each preset carries TCP and UDP both ways on the
// same-node path (client ↔ pod1-1), the cross-node path (client ↔
// server) and node to node (the HOST row); the overlay's cross-node
// packets go through the userspace GENEVE tunnel (tnl_push / tnl_pop
// flows) and the underlay's do not; both nodes' vswitchds are metered.
func TestPrivOVNPresets(t *testing.T) {
	onOVNPresets(t, func(t *testing.T, preset string, l *Lab) {
		if l.Pods != 4 || len(l.Daemons) != 9 {
			t.Fatalf("%d pods, daemons %v; want 4 pods and 9 daemons", l.Pods, l.Daemons)
		}
		if err := l.Health(); err != nil {
			t.Fatal(err)
		}
		m := startMeter(t, l, "no datapath meter for a running OVN lab")
		echoPairs(t, l, 17500, [2]string{"client", "server"}, [2]string{"client", "pod1-1"}, [2]string{"node1", "node2"})
		d, missing := m.Stop(context.Background())
		if d.Seconds == nil || *d.Seconds <= 0 || len(d.Agents) != 2 || d.Agents[0].Node != "node1" || d.Agents[1].Node != "node2" {
			t.Errorf("datapath CPU over the echoes: %+v %v", d, missing)
		}
		if missing["pmd_seconds"] == "" {
			t.Errorf("no PMD without dpdk: want pmd_seconds missing with its reason, got %v", missing)
		}
		flows := datapathFlows(t, l, "node1")
		tunnelled := strings.Contains(flows, "tnl_push(") && strings.Contains(flows, "tnl_pop(")
		if want := preset == TopoOVNOverlay; tunnelled != want {
			t.Errorf("%s: tunnel flows on node1 %v, want %v:\n%s", preset, tunnelled, want, flows)
		}
		if preset == TopoOVNOverlay && !strings.Contains(flows, "geneve(") {
			t.Errorf("overlay: no GENEVE header in node1's tnl_push flows:\n%s", flows)
		}
		mtu := map[string]int{TopoOVNOverlay: 1400, TopoOVNUnderlay: 1500}[preset]
		if l.PodMTU != mtu || podMTU(t, l.Endpoints["client"].Netns) != mtu {
			t.Errorf("pod MTU %d (recorded %d), want Kube-OVN's %d", podMTU(t, l.Endpoints["client"].Netns), l.PodMTU, mtu)
		}
	})
}

func podMTU(t *testing.T, ns string) int {
	t.Helper()
	h, err := netns.Handle(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	eth, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	return eth.Attrs().MTU
}

// TestPrivOVNKnobs: every OVN knob changes what it says, read back from
// the northbound and southbound databases and the datapath's flows, with
// traffic through what it built.
func TestPrivOVNKnobs(t *testing.T) {
	testns.HostWide(t)
	needBuildable(t, TopoOVNOverlay)
	privateState(t)
	// skip_conntrack and policies do not go together (checkOVN says why):
	// the policy is checked on its own lab below.
	l := upLab(t, presetWith(t, TopoOVNOverlay, map[string]string{"tunnel": "vxlan", "router": "on", "services": "3",
		"skip_conntrack": "10.16.0.0/16", "mtu": "1300"}))
	nb := func(args ...string) string { return ovnTool(t, l, "ovn-nbctl", args...) }
	sb := func(args ...string) string { return ovnTool(t, l, "ovn-sbctl", args...) }

	// router: a second switch on the logical router, its pods routed.
	if got := strings.Fields(nb("--bare", "--columns=name", "list", "Logical_Switch")); len(got) != 2 {
		t.Errorf("switches %v, want ovn-default and subnet2", got)
	}
	if got := nb("lrp-list", ovnRouterName); !strings.Contains(got, "ovn-cluster-ovn-default") || !strings.Contains(got, "ovn-cluster-subnet2") {
		t.Errorf("router ports:\n%s", got)
	}
	// services: Kube-OVN's six load balancers on each switch, 3 TCP VIPs,
	// the last one (and its UDP twin) leading to the server.
	for _, ls := range []string{ovnDefaultName, ovnSubnet2Name} {
		if got := strings.Fields(nb("--bare", "--columns=load_balancer", "list", "Logical_Switch", ls)); len(got) != 6 {
			t.Errorf("%s: %d load balancers, want 6", ls, len(got))
		}
	}
	vips := nb("--bare", "--columns=vips", "list", "Load_Balancer", "cluster-tcp-loadbalancer")
	if n := strings.Count(vips, "10.96."); n != 3 || !strings.Contains(vips, l.ServiceIP+":7420=10.16.2.10:7420") {
		t.Errorf("TCP VIPs (%d): %s", n, vips)
	}
	// skip_conntrack: Kube-OVN's option, and the stand-in's ACL and flows.
	if got := nb("get", "NB_Global", ".", "options:skip_conntrack_dst_cidrs"); strings.TrimSpace(got) != `"10.16.0.0/16"` {
		t.Errorf("NB_Global skip_conntrack_dst_cidrs %s", got)
	}
	if got := nb("acl-list", ovnDefaultName); !strings.Contains(got, "allow-stateless") || !strings.Contains(got, "ip4.dst == 10.16.0.0/16") {
		t.Errorf("skip_conntrack ACL on ovn-default:\n%s", got)
	}
	lflows := strings.Join(strings.Fields(sb("lflow-list", ovnDefaultName)), " ")
	for _, want := range []string{
		"(ls_in_pre_acl ), priority=33000, match=(ip4 && ip4.dst == 10.16.0.0/16), action=(reg0[16] = 1; next;)",
		"(ls_in_pre_lb ), priority=110 , match=(reg0[16] == 1), action=(next;)",
		// the load balancer sends every IP packet through conntrack
		"(ls_in_pre_lb ), priority=100 , match=(ip), action=(reg0[2] = 1; next;)",
		"(ls_out_pre_lb ), priority=100 , match=(ip), action=(reg0[2] = 1; next;)",
	} {
		if !strings.Contains(lflows, want) {
			t.Errorf("logical flows of ovn-default lack %s", want)
		}
	}
	// tunnel: both chassis encapsulate with VXLAN.
	if got := strings.Fields(sb("--bare", "--columns=type", "list", "Encap")); len(got) != 2 || got[0] != "vxlan" || got[1] != "vxlan" {
		t.Errorf("encaps %v, want vxlan twice", got)
	}
	// mtu
	if got := podMTU(t, l.Endpoints["client"].Netns); got != 1300 {
		t.Errorf("pod MTU %d, want 1300", got)
	}

	// Traffic through all of it: across the nodes, through the router,
	// through the Service VIP (TCP and UDP), and the policy's default
	// deny for a peer it does not allow.
	echoPairs(t, l, 17520, [2]string{"client", "server"}, [2]string{"client", "routed2"})
	srv, cli := l.Endpoints["server"], l.Endpoints["client"]
	backend := net.JoinHostPort(srv.IP, "7420")
	echoTCP(t, srv.Netns, backend)
	echoUDP(t, srv.Netns, backend)
	vip := net.JoinHostPort(l.ServiceIP, "7420")
	roundTrip(t, cli.Netns, vip, 64<<10)
	udpRoundTrip(t, cli.Netns, vip)
	if flows := datapathFlows(t, l, "node1"); !strings.Contains(flows, "vxlan(") || !strings.Contains(flows, "ct(commit") {
		t.Errorf("node1's flows lack the VXLAN tunnel or the load balancer's conntrack:\n%s", flows)
	}
}

// TestPrivOVNPolicies: policies=N is Kube-OVN's NetworkPolicy on the
// server — a port group, default deny, allow-related rules over address
// sets —, one rule per peer (linear) or one rule over a set of every peer
// (set); an allowed pod gets through both ways, one not allowed does not.
func TestPrivOVNPolicies(t *testing.T) {
	testns.HostWide(t)
	needBuildable(t, TopoOVNOverlay)
	privateState(t)
	for _, c := range []struct {
		preset, mode string
		// lastAddrs: the last rule's allowed peers — node1's two pods,
		// after 999 peers no pod has in set mode.
		n, rules, sets, lastAddrs int
	}{
		{TopoOVNOverlay, "linear", 3, 3, 6, 2},
		{TopoOVNUnderlay, "set", 1000, 1, 2, 1001},
	} {
		t.Run(c.preset+"/"+c.mode, func(t *testing.T) {
			l := upLab(t, presetWith(t, c.preset, map[string]string{"policies": fmt.Sprint(c.n), "policy_mode": c.mode}))
			nb := func(args ...string) string { return ovnTool(t, l, "ovn-nbctl", args...) }
			acls := nb("acl-list", "np.default")
			if strings.Count(acls, "allow-related") != c.rules || strings.Count(acls, "drop") != 1 {
				t.Errorf("NetworkPolicy ACLs, want %d allow-related and one drop:\n%s", c.rules, acls)
			}
			if got := strings.Count(nb("--bare", "--columns=name", "list", "Address_Set"), "np.default.ingress"); got != c.sets {
				t.Errorf("%d address sets, want %d", got, c.sets)
			}
			last := fmt.Sprintf("np.default.ingress.allow.IPv4.%d", c.rules-1)
			if n := len(strings.Fields(nb("--bare", "--columns=addresses", "list", "Address_Set", last))); n != c.lastAddrs {
				t.Errorf("%s has %d addresses, want %d", last, n, c.lastAddrs)
			}
			echoPairs(t, l, 17540, [2]string{"client", "server"})
			denied, srv := l.Endpoints["pod2-1"], l.Endpoints["server"]
			addr := net.JoinHostPort(srv.IP, "17549")
			echoTCP(t, srv.Netns, addr)
			err := netns.Do(denied.Netns, func() error {
				c, err := net.DialTimeout("tcp4", addr, 500*time.Millisecond)
				if err == nil {
					c.Close()
				}
				return err
			})
			if err == nil {
				t.Errorf("pod2-1 (not an allowed peer) reached the server through the NetworkPolicy")
			}
		})
	}
}

// TestPrivOVNDPDK: dpdk=on runs each node's vswitchd as ovs-vswitchd-dpdk
// with af_packet PMD ports and the PMD knobs, GENEVE between the nodes,
// traffic both ways on both paths, the PMDs metered; the lab counts as
// changing the host, and Down removes DPDK's runtime directories.
func TestPrivOVNDPDK(t *testing.T) {
	testns.HostWide(t)
	needBuildable(t, TopoOVNOverlay)
	needBuildable(t, TopoOVSDPDK)
	privateState(t)
	l := upLab(t, presetWith(t, TopoOVNOverlay, map[string]string{"dpdk": "on", "pmd_sleep": "500", "ring_frames": "1024"}))
	if !l.ChangesHost() {
		t.Error("an OVN lab on DPDK must count as changing the host (its PMDs)")
	}
	for _, node := range []string{"node1", "node2"} {
		vs := func(args ...string) string { return strings.TrimSpace(ovnTool(t, l, node+" ovs-vsctl", args...)) }
		if got := vs("get", "Open_vSwitch", ".", "other_config:pmd-maxsleep"); got != `"500"` {
			t.Errorf("%s pmd-maxsleep %s", node, got)
		}
		if got := vs("get", "Open_vSwitch", ".", "dpdk_initialized"); got != "true" {
			t.Errorf("%s dpdk_initialized %s", node, got)
		}
		for _, port := range []string{mustIf(l.ID, "h0"), mustIf(l.ID, "u")} {
			if got := vs("get", "Interface", port, "type"); got != "dpdk" {
				t.Errorf("%s port %s type %s, want dpdk", node, port, got)
			}
			if got := vs("get", "Interface", port, "options:dpdk-devargs"); !strings.HasSuffix(got, `framecnt=1024"`) {
				t.Errorf("%s port %s devargs %s", node, port, got)
			}
		}
		if ents, err := os.ReadDir(filepath.Join(dpdkRunDir, runid.Name(l.ID, node))); err != nil {
			t.Errorf("%s: no DPDK runtime directory: %v (%v)", node, err, ents)
		}
	}
	m := startMeter(t, l, "no datapath meter for a running OVN lab on DPDK")
	echoPairs(t, l, 17560, [2]string{"client", "server"}, [2]string{"client", "pod1-1"})
	d, missing := m.Stop(context.Background())
	if d.PMDSeconds == nil || *d.PMDSeconds <= 0 || d.PMDBusyPct == nil || len(d.Agents) != 2 {
		t.Errorf("PMD figures over the echoes: %+v %v", d, missing)
	}
	if flows := datapathFlows(t, l, "node1"); !strings.Contains(flows, "tnl_push(") {
		t.Errorf("no GENEVE tunnel flows on DPDK node1:\n%s", flows)
	}
}

// TestPrivOVNDaemonKilled: a vswitchd killed while the lab is up (as a
// crash would end it) is what Health reports, by name, node and pid.
func TestPrivOVNDaemonKilled(t *testing.T) {
	testns.HostWide(t)
	needBuildable(t, TopoOVNOverlay)
	privateState(t)
	l := upLab(t, presetWith(t, TopoOVNOverlay, nil))
	var victim, stopped Daemon
	for _, d := range l.Daemons {
		switch {
		case d.Name == "ovs-vswitchd" && d.Where == "node2":
			victim = d
		case d.Name == "ovn-controller" && d.Where == "node1":
			stopped = d
		}
	}
	if victim.PID == 0 || stopped.PID == 0 {
		t.Fatalf("no vswitchd of node2 or ovn-controller of node1 among %v", l.Daemons)
	}
	// A stopped daemon moves nothing: a stall, reported as such.
	if err := unix.Kill(stopped.PID, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var serr error
	for i := 0; i < 200 && serr == nil; i++ {
		time.Sleep(5 * time.Millisecond)
		serr = l.Health()
	}
	var st *DaemonError
	if !errors.As(serr, &st) || !st.Stopped || st.Daemon.PID != stopped.PID || !strings.Contains(serr.Error(), "ovn-controller of node1") {
		t.Errorf("Health with ovn-controller stopped: %v", serr)
	}
	_ = unix.Kill(stopped.PID, unix.SIGCONT)
	for i := 0; i < 200 && l.Health() != nil; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if err := unix.Kill(victim.PID, unix.SIGSEGV); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; i < 200; i++ {
		if err = l.Health(); err != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var dead *DaemonError
	if !errors.As(err, &dead) || dead.Daemon.PID != victim.PID || !strings.Contains(err.Error(), "ovs-vswitchd of node2") {
		t.Fatalf("Health after the kill: %v", err)
	}
	if dead.LogLine == "" {
		t.Errorf("no log line quoted: %v", err)
	}
	var show strings.Builder
	l.WriteSummary(&show)
	if !strings.Contains(show.String(), "BROKEN: ovs-vswitchd of node2") {
		t.Errorf("lab show does not say the lab is broken:\n%s", show.String())
	}
	t.Logf("Health: %v", err)
}

// TestPrivOVNMissing: without OVN, `up` is one line naming the packages
// to install, ErrNotSupported, and leaves nothing.
func TestPrivOVNMissing(t *testing.T) {
	testns.NeedRoot(t)
	privateState(t)
	old := ovnTools
	ovnTools = []struct{ bin, pkg string }{{filepath.Join(t.TempDir(), "ovn-northd"), "ovn-central"}}
	t.Cleanup(func() { ovnTools = old })
	id := pinID(t)
	s, _ := Preset(TopoOVNOverlay)
	_, err := Up(context.Background(), s, UpOptions{})
	if !errors.Is(err, ErrNotSupported) {
		t.Fatalf("want ErrNotSupported, got %v", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "ovn-central ovn-host") || !strings.Contains(msg, "nothing was created") {
		t.Errorf("want one line naming ovn-central ovn-host: %q", msg)
	}
	assertClean(t, id)
}

// TestPrivOVNUpCancelled: Ctrl-C at random moments of an OVN bring-up
// (before, while and after its daemons start) leaves nothing: no process,
// namespace, run directory or state.
func TestPrivOVNUpCancelled(t *testing.T) {
	testns.HostWide(t)
	needBuildable(t, TopoOVNOverlay)
	privateState(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for i := 0; i < 8; i++ {
		id := pinID(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.Int64N(int64(400*time.Millisecond))))
		l, err := Up(ctx, presetWith(t, TopoOVNOverlay, nil), UpOptions{})
		cancel()
		if err == nil {
			if derr := l.Down(context.Background()); derr != nil {
				t.Fatal(derr)
			}
		}
		assertClean(t, id)
	}
}

// TestPrivOVNCleanAfterSIGKILL kills the built binary's `lab up
// ovn-overlay` at random moments (and once it is up), then `lab clean
// --id` must stop every daemon and remove every object.
func TestPrivOVNCleanAfterSIGKILL(t *testing.T) {
	testns.HostWide(t)
	needBuildable(t, TopoOVNOverlay)
	bin := testns.Binary(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	for i := 0; i < 6; i++ {
		var after time.Time
		wait := time.Duration(rng.Int64N(int64(500 * time.Millisecond)))
		id, _ := killLabUp(t, bin, "killed-ovn-"+runid.New(), []string{TopoOVNOverlay}, func(l *Lab) bool {
			if after.IsZero() {
				after = time.Now().Add(wait)
			}
			return l.Complete || time.Now().After(after)
		})
		daemons := len(pidsMentioning(filepath.Join(privOVSRoot, runid.Name(id, ""))))
		cleaned := labClean(t, bin, id)
		assertClean(t, id)
		t.Logf("kill %d after %v: %d daemons running; lab clean: %s", i, wait, daemons, strings.Join(strings.Fields(cleaned), " "))
	}
}
