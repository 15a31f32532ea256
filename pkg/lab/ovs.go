package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	// Only for os/exec's SysProcAttr type; kernel calls go through unix.
	"syscall"
	"time"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/ovsdb"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Open vSwitch's database is written through pkg/ovsdb — JSON-RPC on
// ovsdb-server's socket, the path pkg/tune takes too — and its daemons are
// started and stopped by their own programs; the userspace (netdev)
// datapath needs no kernel module.
var (
	ovsCtl      = "/usr/share/openvswitch/scripts/ovs-ctl"
	ovsRunDir   = "/var/run/openvswitch"
	ovsSchema   = "/usr/share/openvswitch/vswitch.ovsschema"
	privOVSRoot = filepath.Join(stateRoot(), "ovs") // private per-node OVS instances (ovs-netdev-geneve)
)

// probeOVSTools is the probe of the topologies Open vSwitch switches.
func probeOVSTools(ctx context.Context, _ *Spec, _ string) error { return probeOVS(ctx) }

// probeOVS checks that Open vSwitch's daemons and tools are installed.
func probeOVS(context.Context) error {
	for _, tool := range []string{"ovs-appctl", "ovsdb-server", "ovs-vswitchd", "ovsdb-tool"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("open vswitch: %w here: %s not found (install Debian package openvswitch-switch); nothing was created", ErrNotSupported, tool)
		}
	}
	return nil
}

// pidAlive reports whether the process of pidfile runs.
func pidAlive(pidfile string) bool {
	pid, err := readPID(pidfile)
	return err == nil && procAlive(pid)
}

// procAlive reports whether pid runs. A zombie counts as gone: in some
// containers and VMs the init process reaps detached daemons late.
func procAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	st := b[i+2]
	if st == 'Z' {
		// A zombie leader of a process whose other threads still run
		// (ovs-vswitchd-dpdk's PMD while it exits) still holds its
		// memory — hugepages included — so it is not gone yet.
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		return err == nil && len(ents) > 1
	}
	return st != 'X'
}

// hostOVSRunning reports whether the host's ovsdb-server and ovs-vswitchd run.
func hostOVSRunning() bool {
	return pidAlive(filepath.Join(ovsRunDir, "ovsdb-server.pid")) && pidAlive(filepath.Join(ovsRunDir, "ovs-vswitchd.pid"))
}

// run runs a tool and returns a one-line error with its output.
func run(ctx context.Context, ns string, env []string, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := netns.Start(ns, cmd); err != nil {
		return "", fmt.Errorf("%s: %w", argv[0], err)
	}
	if err := cmd.Wait(); err != nil {
		msg := strings.Join(strings.Fields(out.String()), " ")
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return out.String(), fmt.Errorf("%s %s: %v: %s", filepath.Base(argv[0]), strings.Join(argv[1:], " "), err, msg)
	}
	return out.String(), nil
}

// runDying runs a tool in the host namespace that receives SIGKILL if this
// process dies first.
func runDying(ctx context.Context, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// exec.Cmd takes the syscall package's SysProcAttr (x/sys/unix has none).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: unix.SIGKILL}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", filepath.Base(argv[0]), strings.Join(argv[1:], " "), err, strings.Join(strings.Fields(out.String()), " "))
	}
	return out.String(), nil
}

// vswitchdWait bounds how long a change to a switch waits for its
// ovs-vswitchd to apply it: a netdev bridge takes milliseconds, DPDK's
// first initialisation a second or two (ovs-vsctl --timeout=10).
const vswitchdWait = 10 * time.Second

// hostSwitch is the host's Open vSwitch database. Its changes return once
// ovs-vswitchd has applied them — the bridge and its ports exist in the
// datapath — as ovs-vsctl's do without --no-wait.
func hostSwitch() ovsdb.Client {
	return ovsdb.Client{Socket: filepath.Join(ovsRunDir, "db.sock"), Wait: vswitchdWait}
}

// hostVswitchdLog is where Debian's openvswitch-switch logs.
const hostVswitchdLog = "/var/log/openvswitch/ovs-vswitchd.log"

// seeLog names the log that says why ovs-vswitchd did not apply a change.
func seeLog(err error, log string) error {
	if errors.Is(err, ovsdb.ErrNotApplied) {
		return fmt.Errorf("%w (%s)", err, log)
	}
	return err
}

// ensureHostOVS starts the host's Open vSwitch daemons if they are not
// running, recording first (in the fsynced state) that this lab started them
// so Down stops them again.
func (b *builder) ensureHostOVS(ctx context.Context) error {
	if hostOVSRunning() {
		return nil
	}
	b.l.StartedOVS = true
	if err := b.l.save(); err != nil {
		return err
	}
	b.logf("starting Open vSwitch (ovsdb-server, ovs-vswitchd)")
	// ovs-ctl dies with us (Pdeathsig), so a killed `lab up` cannot go on
	// starting daemons after `lab clean` has run.
	if _, err := runDying(ctx, ovsCtl, "--no-monitor", "--system-id=random", "start"); err != nil {
		return fmt.Errorf("start open vswitch: %w", err)
	}
	return nil
}

// stopHostOVS stops the host's Open vSwitch daemons that run, unless a
// bridge is still configured (another lab's, or the user's). It copes with
// a half-started OVS (ovsdb-server without ovs-vswitchd) left by a kill.
func stopHostOVS(ctx context.Context) error {
	dbUp := pidAlive(filepath.Join(ovsRunDir, "ovsdb-server.pid"))
	swUp := pidAlive(filepath.Join(ovsRunDir, "ovs-vswitchd.pid"))
	if !dbUp && !swUp {
		return nil
	}
	if dbUp {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		brs, err := hostSwitch().Bridges(lctx)
		cancel()
		if err == nil && len(brs) > 0 {
			return nil // still in use: leave it running
		}
	}
	// ovs-appctl exit, as ovs-ctl stop does, without ovs-ctl's fixed waits.
	var errs []error
	for _, d := range []struct {
		name string
		up   bool
	}{{"ovs-vswitchd", swUp}, {"ovsdb-server", dbUp}} {
		if !d.up {
			continue
		}
		pidfile := filepath.Join(ovsRunDir, d.name+".pid")
		if _, err := run(ctx, "", nil, "ovs-appctl", "--timeout=5", "-t", d.name, "exit"); err != nil {
			errs = append(errs, err)
			continue
		}
		for i := 0; i < 400 && pidAlive(pidfile); i++ {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// buildOVSNetdev is the Open vSwitch userspace UDP tuning document's setup:
// two namespaces on one datapath_type=netdev bridge.
func (b *builder) buildOVSNetdev(ctx context.Context) error {
	if b.s.OVSSockBuf > 0 {
		// OVS 3.1 has no userspace-sock-buf-size: its packet sockets take
		// the host's rmem_default/wmem_default when a port is added (and
		// the shared send socket when ovs-vswitchd starts). Raise the
		// defaults only for that window, journaled, then undo them.
		j, err := b.journal()
		if err != nil {
			return err
		}
		mark := j.Seq()
		v := strconv.FormatInt(b.s.OVSSockBuf, 10)
		defer func() {
			if err := j.Undo(mark); err != nil {
				b.logf("ovs_sock_buf: %v (left in the journal: lab down restores it)", err)
			}
		}()
		for _, k := range []string{"net.core.rmem_default", "net.core.wmem_default"} {
			if err := j.SetSysctl("", k, v); err != nil {
				return err
			}
		}
	}
	if err := b.ensureHostOVS(ctx); err != nil {
		return err
	}
	for _, p := range b.lo.pods {
		if err := b.vethToPod("", p, 0, nil); err != nil {
			return err
		}
	}
	br := ovsdb.BridgeConfig{Name: b.lo.ovsBr[0], DatapathType: "netdev"}
	for _, p := range b.lo.pods {
		br.Ports = append(br.Ports, ovsdb.Port{Name: p.hostIf})
	}
	if err := hostSwitch().AddBridges(ctx, br); err != nil {
		return fmt.Errorf("open vswitch: %w", seeLog(err, hostVswitchdLog))
	}
	return b.ovsPods(ctx)
}

// ovsPods configures the pods of an OVS topology. TCP across a netdev
// bridge needs TX checksum offload off in the pods: the userspace datapath
// does not complete partial checksums of veth frames.
func (b *builder) ovsPods(_ context.Context) error {
	for _, p := range b.lo.pods {
		if err := b.podUp(p, false, b.serviceRoutes(p)...); err != nil {
			return err
		}
		if _, err := b.offloads(p.netns, "eth0", map[string]bool{"tx": false}); err != nil {
			return fmt.Errorf("tx checksum offload off in %s: %w", p.netns, err)
		}
	}
	return nil
}

// privOVS is a private ovsdb-server + ovs-vswitchd running inside a node
// namespace, so each emulated node has its own switch, its own tunnel
// endpoint address and its own routing table, and nothing of it touches the
// host's namespace or the host's Open vSwitch.
type privOVS struct{ ns, dir string }

// sock is the database's address for the daemons' command lines.
func (o privOVS) sock() string { return "unix:" + filepath.Join(o.dir, "db.sock") }

// client is the private database; its changes wait for the private
// vswitchd as hostSwitch's do for the host's.
func (o privOVS) client() ovsdb.Client {
	return ovsdb.Client{Socket: filepath.Join(o.dir, "db.sock"), Wait: vswitchdWait}
}

// log is the private vswitchd's log file.
func (o privOVS) log() string { return filepath.Join(o.dir, "ovs-vswitchd.log") }

func (o privOVS) env() []string {
	return []string{"OVS_RUNDIR=" + o.dir, "OVS_LOGDIR=" + o.dir, "OVS_DBDIR=" + o.dir, "OVS_SYSCONFDIR=" + o.dir}
}

// start starts the private ovsdb-server and the kernel-datapath vswitchd.
func (o privOVS) start(ctx context.Context) error {
	if err := o.startDB(ctx, ovsdb.Config{}); err != nil {
		return err
	}
	_, err := run(ctx, o.ns, o.env(), "ovs-vswitchd", o.sock(),
		"--pidfile="+filepath.Join(o.dir, "ovs-vswitchd.pid"), "--detach", "--no-chdir",
		"--log-file="+o.log())
	return err
}

// startDB starts the private ovsdb-server and initialises its database
// with cfg (an empty one: `ovs-vsctl --no-wait init`), before any vswitchd
// reads it.
func (o privOVS) startDB(ctx context.Context, cfg ovsdb.Config) error {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	db := filepath.Join(o.dir, "conf.db")
	if _, err := run(ctx, "", nil, "ovsdb-tool", "create", db, ovsSchema); err != nil {
		return err
	}
	if _, err := run(ctx, o.ns, o.env(), "ovsdb-server", db, "--remote=punix:"+filepath.Join(o.dir, "db.sock"),
		"--pidfile="+filepath.Join(o.dir, "ovsdb-server.pid"), "--detach", "--no-chdir",
		"--log-file="+filepath.Join(o.dir, "ovsdb-server.log")); err != nil {
		return err
	}
	return o.client().Configure(ctx, cfg)
}

// stopPrivOVS stops the daemons of private OVS (and OVN) instances and
// removes their directories and DPDK runtime directories; what is missing
// is not an error. Every daemon of every directory gets SIGTERM at once —
// each exits in 5–60 ms — and whatever still runs after a second SIGKILL.
// A daemon that had not written its pid file yet (a killed `up`) is found
// by its command line, which names its private run directory.
func stopPrivOVS(dirs ...string) error {
	var errs []error
	seen := map[int]bool{}
	var pids []int
	add := func(pid int) {
		if !seen[pid] && procAlive(pid) {
			seen[pid] = true
			pids = append(pids, pid)
		}
	}
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
		for _, f := range files {
			if pid, err := readPID(f); err == nil {
				add(pid)
			}
		}
	}
	for _, pid := range pidsMentioning(dirs...) {
		add(pid)
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, unix.SIGTERM); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("stop pid %d: %w", pid, err))
		}
		// A stopped daemon (a broken lab's) takes its SIGTERM only once
		// it runs again.
		_ = unix.Kill(pid, unix.SIGCONT)
	}
	// A zombie counts as gone (procAlive): its init may reap it late, and
	// its sockets, namespace and memory are released at exit.
	waitGone := func(pids []int, d time.Duration) []int {
		deadline := time.Now().Add(d)
		for {
			var left []int
			for _, pid := range pids {
				if procAlive(pid) {
					left = append(left, pid)
				}
			}
			if len(left) == 0 || time.Now().After(deadline) {
				return left
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if left := waitGone(pids, time.Second); len(left) > 0 {
		for _, pid := range left {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		if left = waitGone(left, 2*time.Second); len(left) > 0 {
			errs = append(errs, fmt.Errorf("processes %v of %s still run after SIGKILL", left, strings.Join(dirs, ", ")))
		}
	}
	for _, dir := range dirs {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
		// DPDK without hugepages keeps its EAL runtime directory there,
		// named by --file-prefix: the node's namespace, the directory's
		// name.
		if err := os.RemoveAll(filepath.Join(dpdkRunDir, filepath.Base(dir))); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dpdkRunDir holds DPDK's per-process runtime directories (EAL's
// --file-prefix) when DPDK runs as root without --in-memory.
var dpdkRunDir = "/var/run/dpdk"

// procIDs lists the numeric entries of a /proc directory: the processes
// of /proc, the threads of /proc/<pid>/task.
func procIDs(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, e := range ents {
		if id, err := strconv.Atoi(e.Name()); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// pidsMentioning lists live processes whose command line contains one of
// ss.
func pidsMentioning(ss ...string) []int {
	pids, _ := procIDs("/proc")
	var out []int
	for _, pid := range pids {
		if pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		for _, s := range ss {
			if bytes.Contains(b, []byte(s)) && procAlive(pid) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// buildOVSNetdevGeneve: per node, a private OVS with an integration bridge
// (pod port + GENEVE port) and a physical bridge whose internal port holds
// the node's underlay address and whose uplink is the underlay veth.
func (b *builder) buildOVSNetdevGeneve(ctx context.Context) error {
	var sw [2]privOVS
	for n := 0; n < 2; n++ {
		sw[n] = privOVS{ns: b.lo.nodeNS[n], dir: filepath.Join(privOVSRoot, b.lo.nodeNS[n])}
		if err := sw[n].start(ctx); err != nil {
			return fmt.Errorf("node%d: start private open vswitch: %w", n+1, err)
		}
	}
	u := mustIf(b.l.ID, "u")
	if err := b.underlay(u, 0, 0); err != nil {
		return err
	}
	for n := 1; n <= 2; n++ {
		p := b.lo.pods[n-1]
		ns := b.lo.nodeNS[n-1]
		if err := b.vethToPod(ns, p, 0, nil); err != nil {
			return err
		}
		br, phy := mustIf(b.l.ID, fmt.Sprintf("i%d", n)), mustIf(b.l.ID, fmt.Sprintf("x%d", n))
		tun := mustIf(b.l.ID, fmt.Sprintf("g%d", n))
		err := sw[n-1].client().AddBridges(ctx,
			ovsdb.BridgeConfig{Name: phy, DatapathType: "netdev", Ports: []ovsdb.Port{{Name: u}}},
			ovsdb.BridgeConfig{Name: br, DatapathType: "netdev", Ports: []ovsdb.Port{{Name: p.hostIf},
				{Name: tun, Type: "geneve", Options: map[string]string{"remote_ip": nodeIP(3 - n).String(), "key": "42"}}}})
		if err != nil {
			return fmt.Errorf("node%d: %w", n, seeLog(err, sw[n-1].log()))
		}
		// The node's underlay address lives on the physical bridge's
		// internal port, where OVS native tunnelling looks for it.
		h, err := b.handle(ns)
		if err != nil {
			return err
		}
		var tap netlink.Link
		for i := 0; i < 200; i++ { // vswitchd creates the tap asynchronously
			if tap, err = h.LinkByName(phy); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("node%d: bridge port %s did not appear: %w", n, phy, err)
		}
		if err := h.AddrAdd(tap, &netlink.Addr{IPNet: &net.IPNet{IP: nodeIP(n), Mask: net.CIDRMask(underlayPrefix, 32)}}); err != nil {
			return fmt.Errorf("node%d: underlay address: %w", n, err)
		}
		if err := h.LinkSetMTU(tap, b.lo.underMTU); err != nil {
			return err
		}
		if err := h.LinkSetUp(tap); err != nil {
			return err
		}
	}
	return b.ovsPods(ctx)
}
