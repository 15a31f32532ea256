package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cnibench/cnibench/pkg/ovsdb"
	"github.com/vishvananda/netlink"
	"golang.org/x/sync/errgroup"
)

// Real OVN — the datapath Kube-OVN and OVN-Kubernetes run — on Open
// vSwitch's userspace datapath, which needs no kernel module. Each node
// namespace runs its own ovsdb-server, ovs-vswitchd and ovn-controller; a
// central namespace runs the northbound and southbound databases and
// ovn-northd; every database, socket, pid file and log is under the lab's
// private run directories (privOVSRoot/cnb-<id>-central, -node1, -node2).
// Nothing of the host's Open vSwitch or OVN is opened.
//
// What makes it come up in well under a second (docs/lab.md, RECIPE §7):
// every database is written in one transaction before its daemon starts,
// so each daemon builds everything in its first pass; independent
// daemons start at once; ovn-controller starts only once its integration
// bridge's OpenFlow socket exists (earlier, it backs off for a whole
// second); and readiness is waited on by transactions the database
// servers hold (ovsdb.WaitFor), never by polling.

// The OVN schemas (Debian's ovn-common) and the tools the probe looks for.
var (
	ovnNBSchema = "/usr/share/ovn/ovn-nb.ovsschema"
	ovnSBSchema = "/usr/share/ovn/ovn-sb.ovsschema"
	// ovnTools maps each program the lab runs to its Debian package; a
	// variable so the test of a missing package can point it elsewhere.
	ovnTools = []struct{ bin, pkg string }{{"ovn-northd", "ovn-central"}, {"ovn-controller", "ovn-host"}}
)

// ovnInstall is what the one-line error tells the user to run.
const ovnInstall = "apt-get install ovn-central ovn-host"

// probeOVN checks, before anything is created, that Open vSwitch and OVN
// are installed (and, with dpdk=on, OVS-DPDK and the PMD CPUs).
func probeOVN(ctx context.Context, s *Spec, _ string) error {
	if err := probeOVS(ctx); err != nil {
		return err
	}
	var missing []string
	for _, t := range ovnTools {
		if _, err := exec.LookPath(t.bin); err != nil {
			missing = append(missing, t.bin)
		}
	}
	for _, sc := range []string{ovnNBSchema, ovnSBSchema} {
		if _, err := os.Stat(sc); err != nil {
			missing = append(missing, sc)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: %w here: %s not found (install Debian packages ovn-central ovn-host: %s); nothing was created",
			s.Topology, ErrNotSupported, strings.Join(missing, ", "), ovnInstall)
	}
	if s.DPDK != nil {
		return probeDPDK(s)
	}
	return nil
}

// Daemon is one process a lab runs — its private ovsdb-servers,
// ovs-vswitchds, ovn-controllers, ovn-northd —, recorded when it started
// so that its death is noticed (Lab.Health) and named with its log.
type Daemon struct {
	// Name is the program ("ovs-vswitchd", "ovn-controller", …).
	Name string `json:"name"`
	// Where is the namespace's role: "node1", "node2", "central".
	Where string `json:"where"`
	PID   int    `json:"pid"`
	// Dir is its private run directory, which its command line names (a
	// pid reused by another process does not).
	Dir string `json:"dir"`
	Log string `json:"log"`
}

func (d Daemon) String() string { return fmt.Sprintf("%s of %s (pid %d)", d.Name, d.Where, d.PID) }

// DaemonError is a lab daemon that no longer serves: it exited (the
// datapath crashed or was killed) or it is stopped (SIGSTOP, a debugger):
// either way the lab's datapath is broken. LogLine is the last assertion
// or error line of its log (ErrorLine says so), or else the log's last
// line — a daemon killed by a signal (a segfault among them, with its
// console off) may write nothing at all —, "" when the log is empty.
type DaemonError struct {
	Daemon Daemon
	// Stopped: the process is there but stopped; otherwise it exited.
	Stopped   bool
	LogLine   string
	ErrorLine bool
}

func (e *DaemonError) Error() string {
	what := "exited"
	if e.Stopped {
		what = "is stopped (state T: it moves no packet)"
	}
	switch {
	case e.LogLine == "":
		return fmt.Sprintf("%s %s; its log %s is empty", e.Daemon, what, e.Daemon.Log)
	case e.ErrorLine:
		return fmt.Sprintf("%s %s; last error in its log: %s", e.Daemon, what, e.LogLine)
	case e.Stopped:
		return fmt.Sprintf("%s %s; its log's last line: %s", e.Daemon, what, e.LogLine)
	}
	return fmt.Sprintf("%s %s with no error in its log (killed by a signal?); its last line: %s", e.Daemon, what, e.LogLine)
}

// state is the daemon's process state: "" when it no longer runs as the
// process it started, else its /proc state letter (R, S, T, …).
func (d Daemon) state() string {
	if !procAlive(d.PID) {
		return ""
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d.PID))
	if err != nil || !strings.Contains(string(b), d.Dir) {
		return "" // the pid now belongs to another process
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.PID))
	if err != nil {
		return ""
	}
	if i := strings.LastIndexByte(string(st), ')'); i >= 0 && i+2 < len(st) {
		return string(st[i+2])
	}
	return "?"
}

// Health reports the first of the lab's daemons that exited or is stopped
// (a *DaemonError naming it and its log's last error), nil when all run
// or the lab has none.
func (l *Lab) Health() error {
	for _, d := range l.Daemons {
		switch d.state() {
		case "":
			line, isErr := lastLogLine(d.Log)
			return &DaemonError{Daemon: d, LogLine: line, ErrorLine: isErr}
		case "T", "t":
			line, isErr := lastLogLine(d.Log)
			return &DaemonError{Daemon: d, Stopped: true, LogLine: line, ErrorLine: isErr}
		}
	}
	return nil
}

// lastLogLine is the last line of an OVS/OVN log that says why a daemon
// stopped — an EMER line (assertions: "assertion … failed in …") or an
// ERR line, isErr true — or else the log's last line.
func lastLogLine(path string) (line string, isErr bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	// The end of the log is enough: a dying daemon writes its last words
	// there.
	const tail = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > tail {
		_, _ = f.Seek(fi.Size()-tail, 0)
	}
	buf := make([]byte, tail)
	n, _ := f.Read(buf)
	lines := strings.Split(strings.TrimRight(string(buf[:n]), "\n"), "\n")
	for _, ln := range lines {
		if strings.Contains(ln, "|EMER|") || strings.Contains(ln, "|ERR|") || strings.Contains(ln, "assertion") {
			line, isErr = ln, true
		}
	}
	if !isErr {
		line = lines[len(lines)-1]
	}
	if len(line) > 300 {
		line = line[:300] + "…"
	}
	return strings.TrimSpace(line), isErr
}

// ovnLab is one OVN lab's daemons and their databases while it is built.
type ovnLab struct {
	b       *builder
	central privOVS
	nodes   [2]privOVS
	intBr   string // the integration bridge (ovn-bridge), cnb-<id>-int
	ulBr    string // the physical bridge holding the node's address, cnb-<id>-ul
	// mu guards the lab's Daemons while daemons start in parallel.
	mu sync.Mutex
}

func (o *ovnLab) nb() ovsdb.DB { return ovnNB(o.central.dir) }

func (o *ovnLab) sb() ovsdb.DB {
	return ovsdb.DB{Socket: filepath.Join(o.central.dir, "sb.sock"), Name: "OVN_Southbound"}
}

// ovnEnv is a daemon's environment: OVS and OVN tools and daemons put
// their sockets, pid files, logs and databases in the run directory.
func ovnEnv(dir string) []string {
	return append(privOVS{dir: dir}.env(), "OVN_RUNDIR="+dir, "OVN_LOGDIR="+dir, "OVN_DBDIR="+dir, "OVN_SYSCONFDIR="+dir)
}

// buildOVN builds an ovn-overlay or ovn-underlay lab.
func (b *builder) buildOVN(ctx context.Context) error {
	id := b.l.ID
	o := &ovnLab{b: b, intBr: mustIf(id, "int"), ulBr: mustIf(id, "ul"),
		central: privOVS{ns: b.lo.daemonNS[0], dir: filepath.Join(privOVSRoot, b.lo.daemonNS[0])}}
	for n := range o.nodes {
		o.nodes[n] = privOVS{ns: b.lo.nodeNS[n], dir: filepath.Join(privOVSRoot, b.lo.nodeNS[n])}
	}
	for _, d := range append([]privOVS{o.central}, o.nodes[:]...) {
		if err := os.MkdirAll(d.dir, 0o755); err != nil {
			return err
		}
	}
	t0, last := time.Now(), time.Now()
	phase := func(what string) {
		b.logf("ovn: %-52s +%4d ms (at %4d ms)", what, time.Since(last).Milliseconds(), time.Since(t0).Milliseconds())
		last = time.Now()
	}

	// stage runs the central jobs and perNode for every node at once, and
	// logs done with its time once all of them succeeded.
	stage := func(done string, perNode func(ctx context.Context, n int) error, central ...func(ctx context.Context) error) error {
		g, gctx := errgroup.WithContext(ctx)
		for _, f := range central {
			g.Go(func() error { return f(gctx) })
		}
		for n := range o.nodes {
			g.Go(func() error { return perNode(gctx, n) })
		}
		if err := g.Wait(); err != nil {
			return err
		}
		phase(done)
		return nil
	}

	// 1. The four database servers start while the links and pods are made.
	err := stage("4 ovsdb-servers listening, links and pods made",
		func(ctx context.Context, n int) error {
			return o.startDB(ctx, o.nodes[n], "db", ovsSchema, fmt.Sprintf("node%d", n+1))
		},
		func(ctx context.Context) error { return o.startDB(ctx, o.central, "nb", ovnNBSchema, "central") },
		func(ctx context.Context) error { return o.startDB(ctx, o.central, "sb", ovnSBSchema, "central") },
		b.ovnLinks)
	if err != nil {
		return err
	}

	// 2. Every database in one transaction each, before its daemon runs.
	err = stage("node databases and northbound written (one transaction each)", o.configureNode,
		func(ctx context.Context) error {
			// ovn-controller 23.03 dies of a segfault on a southbound
			// database without its SB_Global row, which ovn-northd makes
			// only after its first run (fixed upstream by OVN fa725727ae8c,
			// first in 26.03): make it now.
			_, err := o.sb().Transact(ctx, ovsdb.Op{"op": "insert", "table": "SB_Global", "row": map[string]any{}})
			if err != nil {
				return fmt.Errorf("southbound SB_Global: %w", err)
			}
			return nil
		},
		func(ctx context.Context) error {
			if _, err := o.nb().Transact(ctx, ovnNorthbound(b.s, b.lo)...); err != nil {
				return fmt.Errorf("northbound database: %w", err)
			}
			return nil
		})
	if err != nil {
		return err
	}

	// 3. ovn-northd and the two switches at once; each node's
	// ovn-controller as soon as its switch listens.
	err = stage("ovn-northd, 2 ovs-vswitchd, 2 ovn-controller started", o.startNode,
		func(ctx context.Context) error {
			_, err := o.start(ctx, o.central, "central", "ovn-northd", "--ovnnb-db=unix:"+o.nb().Socket, "--ovnsb-db=unix:"+o.sb().Socket,
				"--unixctl="+filepath.Join(o.central.dir, "ovn-northd.ctl"))
			return err
		})
	if err != nil {
		return err
	}

	// 4. Ready: both chassis registered, every pod's port up (its flows
	// are in its switch), every chassis caught up with the northbound
	// database, and a packet across the nodes answered.
	wait := ovnReadyTimeout(b.s)
	err = b.l.watchDaemons(ctx, func(ctx context.Context) error {
		var chassis []ovsdb.Op
		for _, ns := range b.lo.nodeNS {
			chassis = append(chassis, ovsdb.Wait("Chassis", []any{ovsdb.Cond("name", "==", ns)}, wait))
		}
		if err := o.sb().WaitFor(ctx, chassis...); err != nil {
			return fmt.Errorf("both chassis in the southbound database: %w", err)
		}
		phase("both chassis registered")
		var up []ovsdb.Op
		for _, p := range b.lo.pods {
			up = append(up, ovsdb.Wait("Logical_Switch_Port",
				[]any{ovsdb.Cond("name", "==", ovnPortName(p)), ovsdb.Cond("up", "==", true)}, wait))
		}
		if err := o.nb().WaitFor(ctx, up...); err != nil {
			return fmt.Errorf("every pod's logical port up: %w", err)
		}
		phase("every pod's logical port up")
		if err := o.nb().Sync(ctx, "hv_cfg", wait); err != nil {
			return fmt.Errorf("chassis caught up (--wait=hv): %w", err)
		}
		phase("--wait=hv sync")
		server, client := b.lo.endpoints()
		if err := ping(ctx, client.netns, server.ip, 5*time.Second); err != nil {
			return fmt.Errorf("client %s to server %s across the nodes: %w", client.ip, server.ip, err)
		}
		phase("cross-node ping answered")
		return nil
	})
	if err != nil {
		return fmt.Errorf("ovn not ready: %w (logs in %s)", err, filepath.Dir(o.central.dir))
	}
	return nil
}

// ovnReadyTimeout bounds each readiness wait: seconds for the small lab,
// more when ovn-northd and the ovn-controllers compile thousands of load
// balancer VIPs or ACLs (10,000 VIPs: ~10 s here).
func ovnReadyTimeout(s *Spec) time.Duration {
	return 20*time.Second + time.Duration(s.Services+s.Policies)*3*time.Millisecond
}

// watchDaemons runs fn while checking every 20 ms that the lab's daemons
// still run: one that exits ends fn (its context is cancelled) and is the
// error, instead of a wait running out its time.
func (l *Lab) watchDaemons(ctx context.Context, fn func(ctx context.Context) error) error {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if err := l.Health(); err != nil {
					cancel(err)
					return
				}
			}
		}
	}()
	err := fn(cctx)
	close(done)
	wg.Wait()
	var dead *DaemonError
	if cause := context.Cause(cctx); errors.As(cause, &dead) {
		return dead
	}
	if err == nil {
		// Between the last tick and the end of fn.
		return l.Health()
	}
	return err
}

// startDB creates a database of schema in o's directory and starts its
// server; --detach returns once it listens.
func (o *ovnLab) startDB(ctx context.Context, d privOVS, name, schema, where string) error {
	db := filepath.Join(d.dir, name+".db")
	if _, err := run(ctx, "", nil, "ovsdb-tool", "create", db, schema); err != nil {
		return err
	}
	_, err := o.start(ctx, d, where, "ovsdb-server", db, "--remote=punix:"+filepath.Join(d.dir, name+".sock"),
		"--unixctl="+filepath.Join(d.dir, name+".ctl"), "--pidfile="+filepath.Join(d.dir, name+".pid"),
		"--log-file="+filepath.Join(d.dir, name+".log"))
	return err
}

// start runs a daemon detached in d's namespace with its files in d's
// directory (pid file and log named after the program unless argv names
// them) and records it.
func (o *ovnLab) start(ctx context.Context, d privOVS, where, prog string, args ...string) (Daemon, error) {
	// ovs-vswitchd-dpdk keeps the plain name's files: the meter and
	// teardown find either by them.
	name := strings.TrimSuffix(filepath.Base(prog), "-dpdk")
	pidfile, log := filepath.Join(d.dir, name+".pid"), filepath.Join(d.dir, name+".log")
	argv := []string{prog}
	named := false
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--pidfile="); ok {
			pidfile, named = v, true
		}
		if v, ok := strings.CutPrefix(a, "--log-file="); ok {
			log = v
		}
	}
	argv = append(argv, args...)
	if !named {
		argv = append(argv, "--pidfile="+pidfile, "--log-file="+log)
	}
	// -vconsole:off keeps the daemon's stderr quiet: everything is in its
	// log, which a failure is quoted from.
	argv = append(argv, "-vconsole:off", "--detach", "--no-chdir")
	d0 := Daemon{Name: name, Where: where, Dir: d.dir, Log: log}
	if name == "ovsdb-server" {
		d0.Where = where + " (" + strings.TrimSuffix(filepath.Base(args[0]), ".db") + ")"
	}
	if _, err := run(ctx, d.ns, ovnEnv(d.dir), argv...); err != nil {
		if line, _ := lastLogLine(log); line != "" {
			return d0, fmt.Errorf("start %s of %s: %w; last log line: %s", name, where, err, line)
		}
		return d0, fmt.Errorf("start %s of %s: %w", name, where, err)
	}
	pid, err := readPID(pidfile)
	if err != nil {
		return d0, fmt.Errorf("start %s of %s: %w", name, where, err)
	}
	d0.PID = pid
	o.mu.Lock()
	o.b.l.Daemons = append(o.b.l.Daemons, d0)
	o.mu.Unlock()
	return d0, nil
}

// ovnLinks makes the underlay link between the nodes and every pod: its
// veth, its address, MAC and route to its subnet's gateway.
func (b *builder) ovnLinks(ctx context.Context) error {
	tasks := []func() error{func() error { return b.underlay(mustIf(b.l.ID, "u"), 0, 0) }}
	for _, p := range b.lo.pods {
		tasks = append(tasks, func() error { return b.ovnPod(p) })
	}
	return each(ctx, tasks, func(f func() error) error { return f() })
}

// ovnPod attaches pod p to its node by a veth whose node end becomes a port
// of the integration bridge, and gives eth0 Kube-OVN's MAC for its address
// (the logical port's addresses name it) and a default route via its
// subnet's gateway, the logical router.
func (b *builder) ovnPod(p pod) error {
	if err := b.vethToPod(b.lo.nodeNS[p.node-1], p, 0, nil); err != nil {
		return err
	}
	h, eth, err := b.podEth(p)
	if err != nil {
		return err
	}
	if err := h.LinkSetHardwareAddr(eth, ovnMAC(p.ip)); err != nil {
		return fmt.Errorf("pod %s: MAC: %w", p.endpoint, err)
	}
	// No IPv6 link-local address: no router or neighbour solicitations
	// and multicast reports crossing the logical switch while measured.
	if err := h.LinkSetIP6AddrGenMode(eth, addrGenModeNone); err != nil {
		return fmt.Errorf("pod %s: ipv6 addrgenmode none: %w", p.endpoint, err)
	}
	if err := b.podUp(p, false); err != nil {
		return err
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: p.lsw.gw}); err != nil {
		return fmt.Errorf("pod %s: default route via %s: %w", p.endpoint, p.lsw.gw, err)
	}
	// The userspace datapath does not complete the partial checksums a
	// veth hands it (as on ovs-netdev): TCP needs TX checksum offload off.
	if _, err := b.offloads(p.netns, "eth0", map[string]bool{"tx": false}); err != nil {
		return fmt.Errorf("tx checksum offload off in %s: %w", p.netns, err)
	}
	return nil
}

// configureNode writes node n's switch into its new database in one
// transaction: the chassis settings ovn-controller reads (Kube-OVN's
// start-ovs.sh sets the same keys), the integration bridge with the node's
// pods, and the physical bridge with the underlay link.
func (o *ovnLab) configureNode(ctx context.Context, n int) error {
	b, s := o.b, o.b.s
	ns := b.lo.nodeNS[n]
	ext := map[string]string{
		"system-id": ns, "hostname": ns,
		"ovn-remote":                  "unix:" + o.sb().Socket,
		"ovn-encap-type":              "geneve",
		"ovn-encap-ip":                nodeIP(n + 1).String(),
		"ovn-bridge":                  o.intBr,
		"ovn-bridge-datapath-type":    "netdev",
		"ovn-remote-probe-interval":   "10000", // Kube-OVN's (dist/images/start-ovs.sh)
		"ovn-openflow-probe-interval": "180",
	}
	if s.OVN.Tunnel != "" {
		ext["ovn-encap-type"] = s.OVN.Tunnel
	} else {
		// Underlay: the switch's localnet port reaches physnet1 through
		// the physical bridge; each chassis's own MAC keeps the
		// distributed router's MAC off the wire (Kube-OVN
		// initProviderChassisMac, pkg/daemon/ovs.go). A chassis still
		// needs an encapsulation, unused by this switch.
		ext["ovn-bridge-mappings"] = ovnPhysnet + ":" + o.ulBr
		ext["ovn-chassis-mac-mappings"] = fmt.Sprintf("%s:0e:00:00:00:00:%02x", ovnPhysnet, n+1)
	}
	intBr := ovsdb.BridgeConfig{Name: o.intBr, DatapathType: "netdev", FailMode: "secure",
		OtherConfig: map[string]string{"disable-in-band": "true"}}
	ulBr := ovsdb.BridgeConfig{Name: o.ulBr, DatapathType: "netdev"}
	var other map[string]string
	u := mustIf(b.l.ID, "u")
	if d := s.DPDK; d != nil {
		other = o.dpdkConfig(n)
		vdev := 0
		port := func(name string, ext map[string]string) ovsdb.Port {
			p := ovsdb.Port{Name: name, Type: "dpdk", MTURequest: b.lo.podMTU, ExternalIDs: ext,
				// Each port its own af_packet virtual device: the vdev
				// name must be unique within the vswitchd.
				Options: map[string]string{"dpdk-devargs": fmt.Sprintf("net_af_packet%d,iface=%s,framecnt=%d", vdev, name, d.ringFrames())}}
			vdev++
			return p
		}
		for _, p := range b.lo.pods {
			if p.node == n+1 {
				intBr.Ports = append(intBr.Ports, port(p.hostIf, map[string]string{"iface-id": ovnPortName(p)}))
			}
		}
		up := port(u, nil)
		up.MTURequest = b.lo.underMTU
		ulBr.Ports = append(ulBr.Ports, up)
	} else {
		for _, p := range b.lo.pods {
			if p.node == n+1 {
				intBr.Ports = append(intBr.Ports, ovsdb.Port{Name: p.hostIf, ExternalIDs: map[string]string{"iface-id": ovnPortName(p)}})
			}
		}
		ulBr.Ports = append(ulBr.Ports, ovsdb.Port{Name: u})
	}
	err := o.nodes[n].client().Configure(ctx, ovsdb.Config{
		ExternalIDs: ext, OtherConfig: other, Bridges: []ovsdb.BridgeConfig{intBr, ulBr}})
	if err != nil {
		return fmt.Errorf("node%d: %w", n+1, err)
	}
	return nil
}

// dpdkConfig is node n's DPDK settings, read once when its vswitchd
// starts. Without hugepages (--no-huge), DPDK needs --legacy-mem said
// explicitly: OVS 3.1 adds --in-memory otherwise, which EAL refuses beside
// --no-huge. EAL then keeps a runtime directory under /var/run/dpdk named
// by --file-prefix (the node's namespace name), removed with the lab.
func (o *ovnLab) dpdkConfig(n int) map[string]string {
	d := o.b.s.DPDK
	return map[string]string{
		"dpdk-init": "true",
		"dpdk-extra": fmt.Sprintf("--no-huge --legacy-mem --no-shconf --no-telemetry -m %d --no-pci --file-prefix=%s",
			d.MemoryMB, o.b.lo.nodeNS[n]),
		"pmd-cpu-mask":         cpuMask(ovnPMDCPUs(d, n)),
		"pmd-maxsleep":         strconv.Itoa(d.PMDSleepUs),
		"userspace-tso-enable": strconv.FormatBool(d.UserspaceTSO),
	}
}

// ovnPMDCPUs are node n's PMD CPUs: pmd_cpus as given (every node's PMDs
// on them), or by default node1's on the highest online CPU and node2's
// on the next one down, so two PMDs do not share a CPU where there are
// two.
func ovnPMDCPUs(d *DPDKSpec, n int) []int {
	if len(d.PMDCPUs) > 0 {
		return d.PMDCPUs
	}
	online, _ := onlineCPUs()
	var cpus []int
	for c := dpdkMaxCPU; c >= 0; c-- {
		if online[c] {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return []int{0}
	}
	return []int{cpus[n%len(cpus)]}
}

// startNode starts node n's vswitchd, gives the node its underlay address
// on the physical bridge's internal port (where OVS's native tunnelling
// and its route table find it), then starts its ovn-controller once the
// integration bridge's OpenFlow socket exists.
func (o *ovnLab) startNode(ctx context.Context, n int) error {
	b, d := o.b, o.nodes[n]
	where := fmt.Sprintf("node%d", n+1)
	prog := "ovs-vswitchd"
	if b.s.DPDK != nil {
		prog = ovsDPDKVswitchd
	}
	// --detach returns after the first reconfiguration: every bridge and
	// port of the database exists.
	if _, err := o.start(ctx, d, where, prog, "unix:"+filepath.Join(d.dir, "db.sock"), "--unixctl="+unixctl(d.dir)); err != nil {
		return err
	}
	h, err := b.handle(d.ns)
	if err != nil {
		return err
	}
	tap, err := waitLink(ctx, h, o.ulBr)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := underlayPort(h, tap, n+1, b.lo.underMTU, true); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	// An ovn-controller that finds no OpenFlow socket waits a whole
	// second before it tries again (rconn's back-off).
	mgmt := filepath.Join(d.dir, o.intBr+".mgmt")
	for i := 0; ; i++ {
		if _, err := os.Stat(mgmt); err == nil {
			break
		}
		if i == 2500 || ctx.Err() != nil {
			return fmt.Errorf("%s: %s did not appear: %v", where, mgmt, ctx.Err())
		}
		time.Sleep(2 * time.Millisecond)
	}
	_, err = o.start(ctx, d, where, "ovn-controller", "unix:"+filepath.Join(d.dir, "db.sock"))
	return err
}

// waitLink waits for a link the vswitchd makes (a bridge's internal port).
func waitLink(ctx context.Context, h *netlink.Handle, name string) (netlink.Link, error) {
	for i := 0; ; i++ {
		l, err := h.LinkByName(name)
		if err == nil {
			return l, nil
		}
		if i == 1000 || ctx.Err() != nil {
			return nil, fmt.Errorf("bridge port %s did not appear: %w", name, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
