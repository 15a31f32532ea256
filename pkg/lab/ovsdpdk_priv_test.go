package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/ovsdbtest"
	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/runid"
)

// quietPMD is the knob that lets an ovs-dpdk lab's PMD sleep when idle
// (pmd-maxsleep 500 µs), so tests that build every preset do not spin a
// CPU of the host running them; the PMD still moves every packet. Other
// presets get no knob.
func quietPMD(topo string) map[string]string {
	if topo == TopoOVSDPDK {
		return map[string]string{"pmd_sleep": "500"}
	}
	return nil
}

// hugepageState is what an ovs-dpdk lab must give back: the sysctl's exact
// bytes and the kernel's pool.
func hugepageState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(rawSysctl(t, "vm/nr_hugepages"))
	for _, k := range []string{"HugePages_Total", "HugePages_Free", "HugePages_Surp"} {
		n, err := meminfo(k)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%d ", k, n)
	}
	return b.String()
}

// assertDPDKReleased checks that nothing of lab id runs or holds memory:
// no process names its private OVS directory, and the hugepages are back.
func assertDPDKReleased(t *testing.T, id, hugeBefore string) {
	t.Helper()
	assertClean(t, id)
	dir := filepath.Join(privOVSRoot, runid.Name(id, "node1"))
	if pids := pidsMentioning(dir); len(pids) > 0 {
		t.Errorf("processes of %s still run: %v", dir, pids)
	}
	// Memory of an exiting process goes back asynchronously; allow it a
	// moment, but no more.
	var now string
	for i := 0; i < 100; i++ {
		if now = hugepageState(t); now == hugeBefore {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("hugepages not given back: %q, before %q", now, hugeBefore)
}

// TestPrivOVSDPDK builds ovs-dpdk with every knob set, reads each back from
// the switch's database and log, carries TCP and UDP both ways through the
// PMD, meters the vswitchd, and checks Down gives everything back.
func TestPrivOVSDPDK(t *testing.T) {
	testns.HostWide(t)
	needBuildable(t, TopoOVSDPDK)
	privateState(t)
	online, err := onlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	pmdCPU := -1
	for c := range online {
		pmdCPU = max(pmdCPU, c)
	}
	before := hugepageState(t)
	// Cleanups run last first: this check follows the Down of upLab.
	var id string
	t.Cleanup(func() {
		if id != "" {
			assertDPDKReleased(t, id, before)
		}
	})
	l := upLab(t, presetWith(t, TopoOVSDPDK, map[string]string{"pmd_cpus": strconv.Itoa(pmdCPU), "pmd_sleep": "200", "userspace_tso": "on", "hugepages": "200", "ring_frames": "1024"}))
	id = l.ID
	ctx := context.Background()
	if !l.ChangesHost() {
		t.Error("an ovs-dpdk lab must count as changing the host (its PMD, its hugepages)")
	}
	if free, err := meminfo("HugePages_Free"); err != nil || free < 200 {
		// DPDK takes every page it was given (dpdk-socket-mem).
		if total, _ := meminfo("HugePages_Total"); total < 200 {
			t.Errorf("hugepages while up: total %d, free %d (%v), want >= 200 reserved", total, free, err)
		}
	}

	sw := privOVS{dir: l.PrivateOVS[0]}
	// Read back with ovs-vsctl, the tool users know, not the code that
	// wrote them.
	get := func(args ...string) string {
		out := ovsdbtest.Vsctl(t, filepath.Join(sw.dir, "db.sock"), append([]string{"get"}, args...)...)
		return strings.Trim(strings.TrimSpace(out), `"`)
	}
	for key, want := range map[string]string{
		"pmd-cpu-mask": cpuMask([]int{pmdCPU}), "pmd-maxsleep": "200", "userspace-tso-enable": "true",
		"dpdk-socket-mem": "400", "dpdk-init": "true",
	} {
		if got := get("Open_vSwitch", ".", "other_config:"+key); got != want {
			t.Errorf("other_config:%s = %q, want %q", key, got, want)
		}
	}
	if got := get("Open_vSwitch", ".", "dpdk_initialized"); got != "true" {
		t.Errorf("dpdk_initialized = %q", got)
	}
	// The running switch took them: its log says so, and its PMD thread
	// runs on the asked CPU.
	logb, err := os.ReadFile(filepath.Join(sw.dir, "ovs-vswitchd.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PMD max sleep request is 200 usecs", "Userspace TCP Segmentation Offloading support enabled",
		fmt.Sprintf("core id: %2d created", pmdCPU)} {
		if !bytes.Contains(logb, []byte(want)) {
			t.Errorf("vswitchd log lacks %q", want)
		}
	}
	for _, port := range []string{mustIf(id, "c"), mustIf(id, "s")} {
		if typ := get("Interface", port, "type"); typ != "dpdk" {
			t.Errorf("port %s type %q, want dpdk", port, typ)
		}
		if args := get("Interface", port, "options:dpdk-devargs"); !strings.HasSuffix(args, ",framecnt=1024") {
			t.Errorf("port %s devargs %q, want framecnt=1024", port, args)
		}
		if mtu := get("Interface", port, "mtu_request"); mtu != strconv.Itoa(makeLayout(l.Spec, l.ID).podMTU) {
			t.Errorf("port %s mtu_request %s, want the pods' %d", port, mtu, makeLayout(l.Spec, l.ID).podMTU)
		}
		if ofport := get("Interface", port, "ofport"); ofport == "-1" || ofport == "[]" {
			t.Errorf("port %s ofport %s: the vswitchd did not set it up", port, ofport)
		}
	}
	// The kernel's side of ring_frames: each port's packet socket maps its
	// receive and transmit rings in one region, 2 × 1024 frames of 2 KiB.
	if rings := packetRings(t, filepath.Join(sw.dir, "ovs-vswitchd.pid")); len(rings) != 2 || rings[0] != 2*1024*2048 || rings[1] != rings[0] {
		t.Errorf("ovs-vswitchd's packet ring mappings %v bytes, want two of %d (ring_frames=1024)", rings, 2*1024*2048)
	}

	m := startMeter(t, l, "no datapath meter for a running ovs-dpdk lab")
	c, srv := l.Endpoints["client"], l.Endpoints["server"]
	for i, pr := range [][2]Endpoint{{c, srv}, {srv, c}} {
		echoBoth(t, pr[0].Netns, pr[1].Netns, net.JoinHostPort(pr[1].IP, fmt.Sprint(17460+i)), 1<<20)
	}
	d, missing := m.Stop(ctx)
	if len(missing) > 0 {
		t.Errorf("datapath meter missing %v", missing)
	}
	if d.PMDSeconds == nil || *d.PMDSeconds <= 0 || d.Seconds == nil || *d.Seconds < *d.PMDSeconds || d.PMDBusyPct == nil || *d.PMDBusyPct <= 0 {
		t.Errorf("datapath CPU over 2 MiB of echoes: %+v", d)
	}
}

// TestPrivOVSDPDKInterrupted cancels `up` once the DPDK vswitchd runs and
// the hugepages are reserved: everything goes, the pages come back.
func TestPrivOVSDPDKInterrupted(t *testing.T) {
	testns.HostWide(t)
	needBuildable(t, TopoOVSDPDK)
	privateState(t)
	before := hugepageState(t)
	id := pinID(t)
	pidfile := filepath.Join(privOVSRoot, runid.Name(id, "node1"), "ovs-vswitchd.pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(pidfile); err == nil {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	s := presetWith(t, TopoOVSDPDK, quietPMD(TopoOVSDPDK))
	_, err := Up(ctx, s, UpOptions{})
	if err == nil {
		t.Fatal("up finished before the cancel; the test proves nothing")
	}
	if !strings.Contains(err.Error(), "everything created was removed") {
		t.Errorf("up: %v", err)
	}
	assertDPDKReleased(t, id, before)
}

// TestPrivOVSDPDKCleanAfterSIGKILL kills `cnibench lab up ovs-dpdk` (the
// built binary) once the lab is up, and `lab clean --id` must stop the
// switch, remove every object and give the hugepages back.
func TestPrivOVSDPDKCleanAfterSIGKILL(t *testing.T) {
	testns.HostWide(t)
	needBuildable(t, TopoOVSDPDK)
	bin := testns.Binary(t)
	before := hugepageState(t)
	id, out := killLabUp(t, bin, "killed-dpdk-"+runid.New(), []string{"ovs-dpdk", "--set", "pmd_sleep=500"},
		func(l *Lab) bool { return l.Complete })
	dir := filepath.Join(privOVSRoot, runid.Name(id, "node1"))
	if len(pidsMentioning(dir)) == 0 || hugepageState(t) == before {
		t.Fatalf("no switch or hugepages at kill time; the test proves nothing (%s)", out)
	}
	labClean(t, bin, id)
	assertDPDKReleased(t, id, before)
}

// TestPrivOVSDPDKMissing: without the DPDK vswitchd, or without a DPDK
// driver it loads as a plugin, `up` is one typed line naming the package
// to install, and leaves nothing.
func TestPrivOVSDPDKMissing(t *testing.T) {
	testns.NeedRoot(t)
	t.Run("vswitchd", func(t *testing.T) {
		old := ovsDPDKVswitchd
		ovsDPDKVswitchd = filepath.Join(t.TempDir(), "ovs-vswitchd-dpdk")
		t.Cleanup(func() { ovsDPDKVswitchd = old })
		ovsDPDKMissing(t, "openvswitch-switch-dpdk")
	})
	t.Run("af_packet driver", func(t *testing.T) {
		old := dpdkPlugins
		dpdkPlugins = append(slices.Clone(old[1:]), struct{ glob, pkg string }{filepath.Join(t.TempDir(), "librte_net_af_packet.so*"), "librte-net-af-packet23"})
		t.Cleanup(func() { dpdkPlugins = old })
		ovsDPDKMissing(t, "librte-net-af-packet23")
	})
}

func ovsDPDKMissing(t *testing.T, pkg string) {
	t.Helper()
	privateState(t)
	id := pinID(t)
	s, _ := Preset(TopoOVSDPDK)
	_, err := Up(context.Background(), s, UpOptions{})
	if !errors.Is(err, ErrNotSupported) {
		t.Fatalf("want ErrNotSupported, got %v", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, pkg) || !strings.Contains(msg, "nothing was created") {
		t.Errorf("want one line naming the package: %q", msg)
	}
	assertClean(t, id)
	if ents, _ := os.ReadDir(StateDir); len(ents) > 0 {
		t.Errorf("state left: %v", ents)
	}
}

// TestPrivOVSNetdevMeter: on ovs-netdev the host's ovs-vswitchd is
// metered; it has no PMD, and says so instead of reporting zeros.
func TestPrivOVSNetdevMeter(t *testing.T) {
	testns.HostWide(t)
	testns.NeedRoot(t)
	needOVS(t)
	privateState(t)
	l := upLab(t, presetWith(t, TopoOVSNetdev, nil))
	m := startMeter(t, l, "no datapath meter for ovs-netdev with the host's vswitchd running")
	c, srv := l.Endpoints["client"], l.Endpoints["server"]
	addr := net.JoinHostPort(srv.IP, "17470")
	echoTCP(t, srv.Netns, addr)
	roundTrip(t, c.Netns, addr, 4<<20)
	d, missing := m.Stop(context.Background())
	if d.Seconds == nil || *d.Seconds <= 0 {
		t.Errorf("vswitchd switched 8 MiB in no CPU time: %+v", d)
	}
	if d.PMDSeconds != nil || d.PMDBusyPct != nil || missing["pmd_seconds"] == "" || missing["pmd_busy_pct"] == "" {
		t.Errorf("no PMD on ovs-netdev: want PMD figures missing with reasons, got %+v %v", d, missing)
	}
}

// packetRings returns the sizes of the socket mappings (packet rings) of
// the process in pidfile, from /proc/PID/maps.
func packetRings(t *testing.T, pidfile string) []uint64 {
	t.Helper()
	pid, err := readPID(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, ln := range strings.Split(string(maps), "\n") {
		f := strings.Fields(ln)
		if len(f) < 6 || !strings.HasPrefix(f[5], "socket:[") {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		z, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("maps line %q", ln)
		}
		out = append(out, z-a)
	}
	return out
}
