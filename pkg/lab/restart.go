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
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/ovsdb"
)

// Restarting a daemon a lab runs privately, as an upgrade or a crash
// under a supervisor does: pkg/disrupt's restart events. Only private
// daemons are restarted — ovs-netdev's vswitchd is the host's, shared
// with whatever else uses Open vSwitch on this machine.

// PrivateDaemon names a daemon Lab.Restart restarts.
type PrivateDaemon string

// The daemons a lab may restart.
const (
	// Vswitchd is a node's ovs-vswitchd (ovs-netdev-geneve, the OVN presets).
	Vswitchd PrivateDaemon = "ovs-vswitchd"
	// OVNController is a node's ovn-controller.
	OVNController PrivateDaemon = "ovn-controller"
	// OVNNorthd is the central ovn-northd.
	OVNNorthd PrivateDaemon = "ovn-northd"
	// OVNNorthbound is the ovsdb-server of the northbound database.
	OVNNorthbound PrivateDaemon = "ovsdb-server (nb)"
	// OVNSouthbound is the ovsdb-server of the southbound database.
	OVNSouthbound PrivateDaemon = "ovsdb-server (sb)"
)

// restartable is everything about one PrivateDaemon.
type restartable struct {
	daemon PrivateDaemon
	// perNode: each node runs one (Restart's node picks it); else the
	// central namespace runs the only one.
	perNode bool
	// pidfile is its pid file's name in its run directory.
	pidfile string
	// takes says which presets run it privately; why is said when a lab
	// does not.
	takes func(t *topology, s *Spec) bool
	why   string
}

var restartables = []restartable{
	{daemon: Vswitchd, perNode: true, pidfile: "ovs-vswitchd.pid",
		// ovs-dpdk's and dpdk=on's DPDK switch restarts with its EAL and
		// PMD threads: not measured, so not offered.
		takes: func(t *topology, s *Spec) bool {
			return (t.name == TopoOVSNetdevGeneve || isOVN(t)) && (s == nil || s.DPDK == nil)
		},
		why: "its nodes' private ovs-vswitchd, without dpdk=on; ovs-netdev's is the host's, shared"},
	{daemon: OVNController, perNode: true, pidfile: "ovn-controller.pid", takes: ovnOnly, why: "the lab's own OVN daemons"},
	{daemon: OVNNorthd, pidfile: "ovn-northd.pid", takes: ovnOnly, why: "the lab's own OVN daemons"},
	{daemon: OVNNorthbound, pidfile: "nb.pid", takes: ovnOnly, why: "the lab's own OVN daemons"},
	{daemon: OVNSouthbound, pidfile: "sb.pid", takes: ovnOnly, why: "the lab's own OVN daemons"},
}

func ovnOnly(t *topology, _ *Spec) bool { return isOVN(t) }

func lookupRestartable(d PrivateDaemon) (restartable, error) {
	for _, r := range restartables {
		if r.daemon == d {
			return r, nil
		}
	}
	return restartable{}, errkind.Errorf(ErrInvalid, "restart %q: want one of %v", d, RestartableDaemons())
}

// RestartableDaemons lists the daemons Lab.Restart knows.
func RestartableDaemons() []PrivateDaemon {
	var out []PrivateDaemon
	for _, r := range restartables {
		out = append(out, r.daemon)
	}
	return out
}

// PerNode says whether each node runs its own d (a restart names the
// node) rather than the central namespace.
func (d PrivateDaemon) PerNode() bool {
	r, err := lookupRestartable(d)
	return err == nil && r.perNode
}

// CheckRestart refuses, before any lab is built, a restart of d that s's
// lab cannot do: a preset that does not run d privately (the error names
// the presets that do) or a node out of range. It wraps ErrInvalid.
func CheckRestart(s *Spec, d PrivateDaemon, node int) error {
	r, err := lookupRestartable(d)
	if err != nil {
		return err
	}
	t, err := lookupTopology(s.Topology)
	if err != nil {
		return errkind.Wrap(ErrInvalid, err)
	}
	if !r.takes(t, s) {
		var ps []string
		for _, p := range topologies {
			if r.takes(p, nil) {
				ps = append(ps, p.name)
			}
		}
		return errkind.Errorf(ErrInvalid, "a restart of %s needs preset %s (%s), not %s", d, strings.Join(ps, " or "), r.why, s.Topology)
	}
	switch {
	case r.perNode && (node < 1 || node > s.Nodes):
		return errkind.Errorf(ErrInvalid, "a restart of %s on node %d: want node 1 to %d", d, node, s.Nodes)
	case !r.perNode && node != 0:
		return errkind.Errorf(ErrInvalid, "a restart of %s on node %d: the lab runs one, in its central namespace (give no node)", d, node)
	}
	return nil
}

// Restart is one restart as it happened.
type Restart struct {
	// Daemon is the new process.
	Daemon Daemon
	// Killed: SIGTERM sent to the old process. Exited: it was gone.
	// Started: the new one's --detach returned (it runs; a database
	// server listens) and what its predecessor's exit took with it was
	// given back (a vswitchd's underlay port). Back: the lab serves again
	// — on an OVN preset, a new northbound nb_cfg has reached every
	// chassis's switch (hv_cfg: ovn-northd compiled it, both
	// ovn-controllers are connected to the southbound database and their
	// switches, and have installed their flows); on ovs-netdev-geneve,
	// Started.
	Killed, Exited, Started, Back time.Time
	// CPU is the new process's run time from its start to Back.
	CPU time.Duration
}

// Restart stops the lab's private daemon d (node 1 or 2 for a per-node
// daemon, 0 for a central one) with SIGTERM, waits for it to exit, starts
// it again with the same command line and environment in the same
// namespace, gives back what its exit took (a vswitchd's underlay port
// loses its address with the old process) and waits until the lab serves
// again (Restart.Back). Once the old process is killed the new one is
// started whatever ctx says, so an interrupted run still leaves the lab
// whole; only the wait for Back ends early. A lab daemon that dies while
// waiting ends the wait with its *DaemonError.
func (l *Lab) Restart(ctx context.Context, d PrivateDaemon, node int) (Restart, error) {
	var rs Restart
	if l.Spec == nil {
		return rs, fmt.Errorf("lab %s: restart %s: %w (no spec)", l.Name, d, ErrInvalid)
	}
	if err := CheckRestart(l.Spec, d, node); err != nil {
		return rs, fmt.Errorf("lab %s: %w", l.Name, err)
	}
	r, _ := lookupRestartable(d)
	lo := makeLayout(l.Spec, l.ID)
	var ns string
	if r.perNode {
		ns = lo.nodeNS[node-1]
	} else {
		ns = lo.daemonNS[0] // CheckRestart: a central daemon's preset has one
	}
	dir := filepath.Join(privOVSRoot, ns)
	pidfile := filepath.Join(dir, r.pidfile)
	old, err := readPID(pidfile)
	if err != nil {
		return rs, fmt.Errorf("restart %s: %w", d, err)
	}
	argv, env, err := procArgs(old)
	if err != nil {
		return rs, fmt.Errorf("restart %s: %w", d, err)
	}
	// The pid file could be stale and its pid another program's: the
	// command line must name the run directory.
	if !slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, dir) }) {
		return rs, fmt.Errorf("restart %s: pid %d (%s) is not the lab's daemon: its command line does not name %s", d, old, argv[0], dir)
	}

	// A new vswitchd starts with no flow: the restart is over once
	// ovn-controller has put back every rule its switch held.
	var ctl string
	rules := 0
	if d == Vswitchd && l.Spec.OVN != nil {
		ctl = unixctl(dir)
		if rules, err = vswitchdRules(ctx, ctl); err != nil {
			return rs, fmt.Errorf("restart %s: rules before: %w", d, err)
		}
	}

	rs.Killed = time.Now()
	if err := unix.Kill(old, unix.SIGTERM); err != nil && !errors.Is(err, unix.ESRCH) {
		return rs, fmt.Errorf("restart %s: stop pid %d: %w", d, old, err)
	}
	for i := 0; i < 2500 && procAlive(old); i++ {
		time.Sleep(2 * time.Millisecond)
	}
	if procAlive(old) {
		return rs, fmt.Errorf("restart %s: pid %d still running 5 s after SIGTERM", d, old)
	}
	rs.Exited = time.Now()

	// From here the daemon is down: start it again whatever ctx says.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := run(sctx, ns, env, argv...); err != nil {
		return rs, fmt.Errorf("restart %s: start: %w", d, err)
	}
	pid, err := readPID(pidfile)
	if err != nil {
		return rs, fmt.Errorf("restart %s: %w", d, err)
	}
	if d == Vswitchd {
		if err := l.underlayBack(sctx, ns, node); err != nil {
			return rs, fmt.Errorf("restart %s: %w", d, err)
		}
	}
	rs.Started = time.Now()
	rs.Daemon = l.restarted(old, pid)
	if err := l.save(); err != nil {
		return rs, fmt.Errorf("restart %s: record pid %d: %w", d, pid, err)
	}

	if l.Spec.OVN != nil {
		nb := ovnNB(filepath.Join(privOVSRoot, l.DaemonNetns()))
		err := l.watchDaemons(ctx, func(ctx context.Context) error {
			if ctl != "" {
				if err := waitRules(ctx, ctl, rules, ovnReadyTimeout(l.Spec)); err != nil {
					return err
				}
			}
			// ovn-controller reports a new nb_cfg once its flows for it
			// are installed — or at once when it had nothing to change,
			// which is why a vswitchd's flows are counted above.
			return nb.Sync(ctx, "hv_cfg", ovnReadyTimeout(l.Spec))
		})
		if err != nil {
			return rs, fmt.Errorf("restart %s: not serving again: %w", d, err)
		}
	}
	rs.Back = time.Now()
	rs.CPU, err = procCPU(pid)
	return rs, err
}

// waitRules waits until the vswitchd of control socket ctl holds at least
// want OpenFlow rules again, asking every 5 ms (the restart's end is known
// to that; its CPU and the vswitchd's stay small).
func waitRules(ctx context.Context, ctl string, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := vswitchdRules(ctx, ctl)
		switch {
		case err == nil && n >= want:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("the switch holds %d OpenFlow rules after %s, %d before the restart (last error: %v)", n, timeout, want, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// restarted records that the lab's daemon old is now pid and returns it.
// A preset that does not record its daemons (ovs-netdev-geneve) gets an
// entry without a log.
func (l *Lab) restarted(old, pid int) Daemon {
	for i := range l.Daemons {
		if l.Daemons[i].PID == old {
			l.Daemons[i].PID = pid
			return l.Daemons[i]
		}
	}
	return Daemon{PID: pid}
}

// underlayBack gives node's underlay port — the physical bridge's internal
// port, a tap the old vswitchd owned and the new one made again — what the
// lab's build gave it.
func (l *Lab) underlayBack(ctx context.Context, ns string, node int) error {
	h, err := netns.Handle(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	name, noIPv6 := mustIf(l.ID, fmt.Sprintf("x%d", node)), false
	if l.Spec.OVN != nil {
		name, noIPv6 = mustIf(l.ID, "ul"), true
	}
	tap, err := waitLink(ctx, h, name)
	if err != nil {
		return err
	}
	return underlayPort(h, tap, node, makeLayout(l.Spec, l.ID).underMTU, noIPv6)
}

// underlayPort gives a node's underlay port the node's address and the
// underlay MTU and brings it up; with noIPv6 it gets no IPv6 link-local
// address (set before it is up, which would make one): nothing but the
// lab's traffic on the underlay.
func underlayPort(h *netlink.Handle, tap netlink.Link, node, mtu int, noIPv6 bool) error {
	name := tap.Attrs().Name
	if err := h.AddrReplace(tap, &netlink.Addr{IPNet: &net.IPNet{IP: nodeIP(node), Mask: net.CIDRMask(underlayPrefix, 32)}}); err != nil {
		return fmt.Errorf("underlay address on %s: %w", name, err)
	}
	if err := h.LinkSetMTU(tap, mtu); err != nil {
		return fmt.Errorf("underlay MTU on %s: %w", name, err)
	}
	if noIPv6 {
		if err := h.LinkSetIP6AddrGenMode(tap, addrGenModeNone); err != nil {
			return fmt.Errorf("ipv6 addrgenmode none on %s: %w", name, err)
		}
	}
	if err := h.LinkSetUp(tap); err != nil {
		return fmt.Errorf("%s up: %w", name, err)
	}
	return nil
}

// procArgs is a running process's command line and environment, to start
// it again as it was.
func procArgs(pid int) (argv, env []string, err error) {
	split := func(b []byte) []string {
		var out []string
		for _, f := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
			out = append(out, string(f))
		}
		return out
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 {
		return nil, nil, fmt.Errorf("command line of pid %d: %v (it exited?)", pid, err)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, nil, fmt.Errorf("environment of pid %d: %w", pid, err)
	}
	return split(cmdline), split(environ), nil
}

// procCPU is the time a process's threads have run, from each thread's
// /proc/<pid>/task/<tid>/schedstat (nanoseconds; /proc/<pid>/stat counts
// in 10 ms ticks, too coarse for a daemon's start).
func procCPU(pid int) (time.Duration, error) {
	tids, err := procIDs(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, tid := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, fmt.Errorf("/proc/%d/task/%d/schedstat: empty", pid, tid)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/task/%d/schedstat: %q", pid, tid, f[0])
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// ovnNB is the northbound database of the central run directory dir.
func ovnNB(dir string) ovsdb.DB {
	return ovsdb.DB{Socket: filepath.Join(dir, "nb.sock"), Name: "OVN_Northbound"}
}
