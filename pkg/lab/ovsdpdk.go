package lab

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/ovsdb"
)

// The ovs-dpdk preset is the ovs-netdev topology (two pods on one
// datapath_type=netdev bridge) switched by Open vSwitch built with DPDK, as
// OVN-Kubernetes' DPDK datapath runs it (seed 003): poll-mode (PMD) threads
// pinned to CPUs, hugepage memory, optional load-based sleeping. Debian's
// openvswitch-switch-dpdk installs that vswitchd beside the plain one
// without making it the default; cnibench runs it privately per lab, inside
// the lab's node namespace with its database, sockets and logs under the
// lab's private OVS directory — never the host's Open vSwitch. The pods'
// veth host ends are DPDK ports through DPDK's af_packet poll-mode driver,
// so the PMD, not the kernel, moves every packet between the pods.

// ovsDPDKVswitchd is the DPDK build of ovs-vswitchd; a variable so the test
// of a missing package can point it elsewhere.
var ovsDPDKVswitchd = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"

// dpdkInstall is what the one-line errors tell the user to run.
const dpdkInstall = "apt-get install openvswitch-switch-dpdk"

// dpdkPlugins are the DPDK drivers the lab's switch loads as plugins: the
// af_packet PMD for its ports and the ring mempool every DPDK pool needs.
// Debian only recommends them beside openvswitch-switch-dpdk, and without
// them DPDK starts and then fails to attach the first port. A variable
// (glob -> package) so the test of a missing driver can point it elsewhere.
var dpdkPlugins = []struct{ glob, pkg string }{
	{"/usr/lib/*/dpdk/pmds-*/librte_net_af_packet.so*", "librte-net-af-packet23"},
	{"/usr/lib/*/dpdk/pmds-*/librte_mempool_ring.so*", "librte-mempool-ring23"},
}

// probeOVSDPDK checks, before anything is created, that the DPDK vswitchd
// and the OVS tools are installed and that the asked PMD CPUs are online.
func probeOVSDPDK(ctx context.Context, s *Spec, _ string) error {
	if err := probeOVS(ctx); err != nil {
		return err
	}
	if size, err := hugepageSizeKB(); err != nil || size != 2048 {
		return fmt.Errorf("ovs-dpdk: %w here: the default hugepage size is not 2 MiB (%d kB, %v); nothing was created", ErrNotSupported, size, err)
	}
	return probeDPDK(s)
}

// probeDPDK checks that the DPDK vswitchd and the DPDK drivers the lab's
// ports need are installed and that the asked PMD CPUs are online.
func probeDPDK(s *Spec) error {
	if fi, err := os.Stat(ovsDPDKVswitchd); err != nil || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: %w here: %s is not installed (install Debian package openvswitch-switch-dpdk: %s); nothing was created",
			s.Topology, ErrNotSupported, ovsDPDKVswitchd, dpdkInstall)
	}
	for _, p := range dpdkPlugins {
		if m, _ := filepath.Glob(p.glob); len(m) == 0 {
			return fmt.Errorf("%s: %w here: DPDK's driver %s is not installed (install Debian package %s: apt-get install %s); nothing was created",
				s.Topology, ErrNotSupported, filepath.Base(strings.TrimSuffix(p.glob, "*")), p.pkg, p.pkg)
		}
	}
	online, err := onlineCPUs()
	if err != nil {
		return fmt.Errorf("%s: online CPUs: %w; nothing was created", s.Topology, err)
	}
	for _, c := range s.DPDK.PMDCPUs {
		if !online[c] {
			return invalidError{fmt.Errorf("knob pmd_cpus: CPU %d is not online here (online: %s); nothing was created", c, cpuListString(online))}
		}
	}
	return nil
}

// onlineCPUs reads /sys/devices/system/cpu/online.
func onlineCPUs() (map[int]bool, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	cpus, err := parseCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, c := range cpus {
		out[c] = true
	}
	return out, nil
}

func cpuListString(m map[int]bool) string {
	var parts []string
	for c := 0; c <= dpdkMaxCPU; c++ {
		if m[c] {
			parts = append(parts, strconv.Itoa(c))
		}
	}
	return strings.Join(parts, ",")
}

// meminfo reads one "Key: N [kB]" line of /proc/meminfo.
func meminfo(key string) (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == key {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/meminfo has no %s", key)
}

func hugepageSizeKB() (int64, error) { return meminfo("Hugepagesize") }

// reserveHugepages makes sure n free 2 MiB hugepages exist: when fewer are
// free it raises vm.nr_hugepages by the shortfall, through the lab's
// journal, so Down, a failed Up and `lab clean` give them back exactly.
func (b *builder) reserveHugepages(n int) error {
	free, err := meminfo("HugePages_Free")
	if err != nil {
		return fmt.Errorf("hugepages: %w", err)
	}
	if free >= int64(n) {
		return nil
	}
	raw, err := os.ReadFile("/proc/sys/vm/nr_hugepages")
	if err != nil {
		return fmt.Errorf("hugepages: %w", err)
	}
	total, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return fmt.Errorf("hugepages: vm.nr_hugepages %q: %w", raw, err)
	}
	want := total + int64(n) - free
	b.logf("hugepages: vm.nr_hugepages %d -> %d until `lab down` (journal %s)", total, want, journalDir())
	if err := b.sysctl("", "vm.nr_hugepages", strconv.FormatInt(want, 10)); err != nil {
		return err
	}
	// The kernel reserves what it can find: a fragmented host gives fewer.
	if free, err = meminfo("HugePages_Free"); err != nil {
		return fmt.Errorf("hugepages: %w", err)
	}
	if free < int64(n) {
		return fmt.Errorf("ovs-dpdk: %w here: only %d of %d 2 MiB hugepages could be reserved (memory too fragmented or too small; try hugepages=%d)",
			ErrNotSupported, free, n, max(free, 64))
	}
	return nil
}

// dpdkSwitch is the lab's private OVS-DPDK instance.
func (b *builder) dpdkSwitch() privOVS {
	ns := b.lo.nodeNS[0]
	return privOVS{ns: ns, dir: filepath.Join(privOVSRoot, ns)}
}

// unixctl is the vswitchd's control socket (ovs-appctl -t), at a fixed
// path so the datapath meter need not know the daemon's pid.
func unixctl(dir string) string { return filepath.Join(dir, "vswitchd.ctl") }

// buildOVSDPDK: hugepages, a private ovsdb-server and ovs-vswitchd-dpdk in
// node1 with DPDK's settings written before the vswitchd starts (DPDK reads
// them once, at its initialisation), then the bridge and one af_packet DPDK
// port per pod.
func (b *builder) buildOVSDPDK(ctx context.Context) error {
	d := b.s.DPDK
	if err := b.reserveHugepages(d.Hugepages); err != nil {
		return err
	}
	sw := b.dpdkSwitch()
	pmd := d.PMDCPUs
	if len(pmd) == 0 {
		online, err := onlineCPUs()
		if err != nil {
			return err
		}
		for c := dpdkMaxCPU; c >= 0; c-- {
			if online[c] {
				pmd = []int{c}
				break
			}
		}
	}
	t0 := time.Now()
	cfg := ovsdb.Config{OtherConfig: map[string]string{
		"dpdk-init": "true",
		// DPDK gets every page reserved for it; --in-memory keeps its
		// memory in memfds (no hugetlbfs mount, no files left behind).
		"dpdk-socket-mem":      strconv.Itoa(2 * d.Hugepages),
		"dpdk-extra":           "--in-memory",
		"pmd-cpu-mask":         cpuMask(pmd),
		"pmd-maxsleep":         strconv.Itoa(d.PMDSleepUs),
		"userspace-tso-enable": strconv.FormatBool(d.UserspaceTSO),
	}}
	if err := sw.startDB(ctx, cfg); err != nil {
		return fmt.Errorf("ovs-dpdk: start and configure private ovsdb-server: %w", err)
	}
	_, err := run(ctx, sw.ns, sw.env(), ovsDPDKVswitchd, sw.sock(),
		"--pidfile="+filepath.Join(sw.dir, "ovs-vswitchd.pid"), "--detach", "--no-chdir",
		"--unixctl="+unixctl(sw.dir), "--log-file="+sw.log())
	if err != nil {
		return sw.dpdkFailed(err)
	}
	for _, p := range b.lo.pods {
		if err := b.vethToPod(sw.ns, p, 0, nil); err != nil {
			return err
		}
	}
	br := ovsdb.BridgeConfig{Name: mustIf(b.l.ID, "br"), DatapathType: "netdev"}
	for i, p := range b.lo.pods {
		// Each port is its own DPDK virtual device: the vdev name must be
		// unique within the vswitchd, the iface is the veth's host end.
		br.Ports = append(br.Ports, ovsdb.Port{Name: p.hostIf, Type: "dpdk", MTURequest: b.lo.podMTU,
			Options: map[string]string{"dpdk-devargs": fmt.Sprintf("net_af_packet%d,iface=%s,framecnt=%d", i, p.hostIf, d.ringFrames())}})
	}
	// The client waits for the vswitchd to apply it: DPDK initialised and
	// the ports attached (or failed).
	if err := sw.client().AddBridges(ctx, br); err != nil {
		if ok, gerr := sw.client().DPDKInitialized(ctx); gerr != nil || !ok {
			return sw.dpdkFailed(err)
		}
		return fmt.Errorf("ovs-dpdk: %w", seeLog(err, sw.log()))
	}
	if err := sw.checkDPDK(ctx, b.lo.pods); err != nil {
		return err
	}
	b.logf("ovs-dpdk: vswitchd with DPDK, PMD on CPU %s, ports attached in %v", cpuMask(pmd), time.Since(t0).Round(time.Millisecond))
	return b.ovsPods(ctx)
}

// checkDPDK confirms DPDK initialised and every port attached without error.
func (o privOVS) checkDPDK(ctx context.Context, pods []pod) error {
	ok, err := o.client().DPDKInitialized(ctx)
	if err != nil {
		return o.dpdkFailed(err)
	}
	if !ok {
		return o.dpdkFailed(errors.New("dpdk_initialized is false"))
	}
	for _, p := range pods {
		iface, found, err := o.client().Interface(ctx, p.hostIf)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("ovs-dpdk: port %s is not in the switch's database (vswitchd log: %s)", p.hostIf, o.log())
		}
		if iface.Error != "" {
			return fmt.Errorf("ovs-dpdk: port %s: %s (vswitchd log: %s)", p.hostIf, iface.Error, o.log())
		}
	}
	return nil
}

// dpdkFailed turns a vswitchd that died or whose DPDK did not initialise
// into the one-line ErrNotSupported error, quoting the log's last error.
func (o privOVS) dpdkFailed(cause error) error {
	why := cause.Error()
	if b, err := os.ReadFile(o.log()); err == nil {
		var last string
		for _, ln := range bytes.Split(b, []byte("\n")) {
			if bytes.Contains(ln, []byte("|ERR|")) || bytes.Contains(ln, []byte("|EMER|")) {
				last = string(ln)
			}
		}
		if last != "" {
			if i := strings.LastIndex(last, "|"); i >= 0 {
				last = last[i+1:]
			}
			why = strings.TrimSpace(last)
		}
	}
	if len(why) > 200 {
		why = why[:200] + "…"
	}
	return fmt.Errorf("ovs-dpdk: %w here: DPDK did not initialise (%s); needs 2 MiB hugepages and Debian's openvswitch-switch-dpdk with its DPDK libraries (%s)",
		ErrNotSupported, why, dpdkInstall)
}
