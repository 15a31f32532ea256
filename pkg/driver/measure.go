package driver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	// Only for the types os/exec speaks (SysProcAttr, the *Rusage of
	// ProcessState.SysUsage); every call into the kernel goes through unix.
	"syscall"
	"time"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/result"
	"golang.org/x/sys/unix"
)

// Timeouts used by Measure. Variables so a slow CI host can widen them.
var (
	// ReadyTimeout bounds how long a server may take to bind its port.
	ReadyTimeout = 10 * time.Second
	// ClientMargin is added to duration+warmup for the client's deadline;
	// it covers connection setup and the tools' own result exchange.
	ClientMargin = 20 * time.Second
	// StopGrace is how long a server gets after SIGTERM before SIGKILL.
	StopGrace = 2 * time.Second
	// ChildGrace is how long a forking server's per-test children get to
	// exit (and be reaped) after the client is done.
	ChildGrace = 3 * time.Second
)

// Measure runs one measurement of spec with d across two network namespaces:
// it starts d's server in serverNS, waits until the server has bound its port
// there, runs d's client in clientNS with a deadline of duration + warmup +
// ClientMargin, parses the client's output, and stops the server by its
// process group on every path (success, failure, ctx cancelled). An empty
// namespace name means the caller's namespace.
//
// When the tool reports no process CPU for a side, Measure fills it from the
// process's rusage (user+sys): the client's over its own run, the server's
// over its whole life (servers idle while not serving, so this is close to
// the CPU spent on the test). ProcessPct divides by the client's wall time,
// the interval both sides were busy.
func Measure(ctx context.Context, d Driver, spec Spec, serverNS, clientNS string) (*result.Result, error) {
	name := d.Name()
	spec, srvArgv, cliArgv, err := prepare(d, spec, true)
	if err != nil {
		return nil, err
	}

	srv, err := startProcess(nil, serverNS, spec.ServerCPU, srvArgv, nil)
	if err != nil {
		return nil, fmt.Errorf("start %s server in netns %q: %w", name, serverNS, err)
	}
	stopped := false
	stopServer := func() {
		if !stopped {
			stopped = true
			srv.stop()
		}
	}
	defer stopServer()

	if err := srv.waitListening(ctx, spec.Port, serverUDPOnly(d, spec.Test), ReadyTimeout); err != nil {
		return nil, fmt.Errorf("%s server (%s): %w", name, strings.Join(srvArgv, " "), err)
	}

	cli, stdout, timedOut, err := runClient(ctx, name, spec, clientNS, cliArgv)
	if err != nil {
		return nil, err
	}
	// A server that forks per test (qperf) only has its children's CPU in
	// its rusage once it has reaped them; give them a moment to finish.
	childrenLeft := srv.waitChildrenGone(ChildGrace)
	stopServer()

	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", name, ctx.Err())
	}
	if timedOut {
		return nil, fmt.Errorf("%s client did not finish within %s (killed): %s", name,
			spec.Duration+spec.Warmup+ClientMargin, tailLine(cli.stderr.String(), srv.stderr.String()))
	}
	r, perr := d.Parse(spec, stdout)
	if cli.waitErr != nil {
		// The tool's own message (e.g. iperf3's JSON "error") beats an exit status.
		if perr != nil {
			return nil, fmt.Errorf("%s client failed (%v): %v; stderr: %s", name, cli.waitErr, perr, tailLine(cli.stderr.String(), srv.stderr.String()))
		}
		return nil, fmt.Errorf("%s client failed (%v): %s", name, cli.waitErr, tailLine(cli.stderr.String(), srv.stderr.String()))
	}
	if perr != nil {
		return nil, fmt.Errorf("%s: %w; stderr: %s", name, perr, tailLine(cli.stderr.String(), srv.stderr.String()))
	}

	wall := fillFromClient(r, name, cliArgv, cli)
	if r.Tool.Version == "" {
		if v, err := d.Version(); err == nil {
			r.Tool.Version = v
		} else {
			r.SetMissing("tool.version", err.Error())
		}
	}
	if len(childrenLeft) == 0 {
		fillProcessCPU(r, "server", srv.cmd.ProcessState, wall)
	} else if r.CPU == nil || r.CPU.Server == nil || r.CPU.Server.ProcessSeconds == nil {
		r.SetMissing("cpu.server.process_seconds", fmt.Sprintf(
			"the server's forked children (pids %v) were still running after the test, so its rusage would miss their CPU", childrenLeft))
	}
	return r, nil
}

// fillProcessCPU stores a side's rusage (user+sys seconds) when the tool did
// not report that side's process seconds, derives the percentage and the
// per-transaction and per-GB costs where the tool gave none, and removes the
// matching Missing entries.
func fillProcessCPU(r *result.Result, side string, ps *os.ProcessState, wall float64) {
	if ps == nil {
		return
	}
	// os.ProcessState and exec.Cmd speak the syscall package's types
	// (Rusage, SysProcAttr, WaitStatus), and x/sys/unix's look-alikes are
	// distinct types: these are the only syscall uses left in cnibench.
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return
	}
	if r.CPU == nil {
		r.CPU = &result.CPU{}
	}
	c := &r.CPU.Client
	if side == "server" {
		c = &r.CPU.Server
	}
	if *c == nil {
		*c = &result.CPUSide{}
	}
	s := *c
	if s.ProcessSeconds != nil {
		return // the tool measured it
	}
	user := tvSeconds(ru.Utime)
	sys := tvSeconds(ru.Stime)
	total := user + sys
	s.ProcessUserSeconds, s.ProcessSystemSeconds, s.ProcessSeconds = result.F(user), result.F(sys), result.F(total)
	if s.ProcessPct == nil && wall > 0 { // a tool's own percentage (iperf3) is kept
		s.ProcessPct = result.F(100 * total / wall)
	}
	if s.UsPerTransaction == nil && r.Transactions != nil && r.Transactions.Count > 0 {
		s.UsPerTransaction = result.F(total * 1e6 / float64(r.Transactions.Count))
	}
	if s.SecondsPerGB == nil && r.Throughput != nil {
		b := r.Throughput.BytesSent
		if side == "server" {
			b = r.Throughput.BytesReceived
		}
		if b != nil && *b > 0 {
			s.SecondsPerGB = result.F(total / (float64(*b) / 1e9))
		}
	}
	prefix := "cpu." + side
	for k := range r.Missing {
		if k == "cpu" || k == prefix || strings.HasPrefix(k, prefix+".process_") {
			delete(r.Missing, k)
		}
	}
	if len(r.Missing) == 0 {
		r.Missing = nil
	}
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

// process is a started command in its own process group, so that stopping
// it also stops whatever it forked (qperf forks a child per test).
type process struct {
	cmd     *exec.Cmd
	stderr  *tailBuffer
	done    chan struct{}
	waitErr error
	started time.Time
	ended   time.Time
}

// startProcess starts argv in namespace ns in a new process group, pinned to
// cpu when it is not nil. When ctx is not nil, its end kills the whole group.
func startProcess(ctx context.Context, ns string, cpu *int, argv []string, stdout *bytes.Buffer) (*process, error) {
	p := &process{stderr: &tailBuffer{max: 4096}, done: make(chan struct{})}
	c := exec.Command(argv[0], argv[1:]...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if stdout != nil {
		c.Stdout = stdout
	} else {
		c.Stdout = p.stderr // a server's chatter is only kept for error messages
	}
	c.Stderr = p.stderr
	p.cmd = c
	p.started = time.Now()
	if err := startPinned(ns, cpu, c); err != nil {
		return nil, err
	}
	go func() {
		p.waitErr = c.Wait()
		p.ended = time.Now()
		close(p.done)
	}()
	if ctx != nil {
		go func() {
			select {
			case <-ctx.Done():
				_ = unix.Kill(-c.Process.Pid, unix.SIGKILL)
			case <-p.done:
			}
		}()
	}
	return p, nil
}

// stop ends the process group: SIGTERM, then SIGKILL after StopGrace, and
// SIGKILL to the group once more after the leader is gone, for children it
// forked. It waits for the leader to be reaped.
func (p *process) stop() {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done:
	default:
		_ = unix.Kill(-pgid, unix.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(StopGrace):
			_ = unix.Kill(-pgid, unix.SIGKILL)
			<-p.done
		}
	}
	if err := unix.Kill(-pgid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		_ = err // EPERM cannot happen for our own children; nothing else to do
	}
}

// waitChildrenGone waits up to timeout until the process's group holds no
// process but the leader, and returns the pids still left in it. Reaped
// children's CPU is part of the leader's rusage; unreaped ones' is not.
func (p *process) waitChildrenGone(timeout time.Duration) []int {
	deadline := time.Now().Add(timeout)
	for {
		left := groupMembers(p.cmd.Process.Pid)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		select {
		case <-p.done:
			return nil // the leader exited on its own (iperf3 -s -1): all reaped or orphaned
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// groupMembers lists the processes of process group pgid other than its
// leader, from /proc/<pid>/stat (field 5, pgrp). Zombies count: their CPU
// reaches the leader's rusage only when it reaps them.
func groupMembers(pgid int) []int {
	return Procs("stat", func(pid int, stat []byte) bool {
		g, ok := statPgrp(stat)
		return ok && g == pgid && pid != pgid
	})
}

// Procs returns the pids of the processes whose /proc/<pid>/<file> (e.g.
// "stat", "cmdline") keep accepts. A process that exits while it is being
// read is left out, as if it had gone before.
func Procs(file string, keep func(pid int, content []byte) bool) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/" + file)
		if err == nil && keep(pid, b) {
			out = append(out, pid)
		}
	}
	return out
}

// statPgrp reads the process group from a /proc/<pid>/stat line. The command
// name (field 2) may hold spaces and parentheses, so fields are counted from
// the last ')'.
func statPgrp(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:])) // state, ppid, pgrp, ...
	if len(f) < 3 {
		return 0, false
	}
	g, err := strconv.Atoi(f[2])
	return g, err == nil
}

// waitListening polls the server's own view of its network namespace
// (/proc/<pid>/net/{tcp,tcp6,udp,udp6}) until port is bound: a TCP socket in
// LISTEN or a bound UDP socket. Probing with a connection instead would use
// up one-shot servers such as `iperf3 -s -1`.
func (p *process) waitListening(ctx context.Context, port int, udpOnly bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("exited before listening (%v): %s", p.waitErr, tailLine(p.stderr.String()))
		default:
		}
		ok, err := portBound(fmt.Sprintf("/proc/%d/net", p.cmd.Process.Pid), port, udpOnly)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on port %d after %s: %s", port, timeout, tailLine(p.stderr.String()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// portBound reports whether the network namespace whose tables are under
// procNet (/proc/<pid>/net) has port bound:
// a TCP listener, or for a server that binds only UDP, a UDP socket. Only
// the server's own protocol counts: any other socket of that namespace may
// hold the same number as a UDP port (TestServeQperf once saw qperf
// declared ready before it listened, while other packages' tests ran).
func portBound(procNet string, port int, udpOnly bool) (bool, error) {
	tables := []string{"tcp", "tcp6"}
	if udpOnly {
		tables = []string{"udp", "udp6"}
	}
	for _, f := range tables {
		b, err := os.ReadFile(filepath.Join(procNet, f))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // no IPv6, or the process is gone (caught by the caller)
			}
			return false, err
		}
		if ParseProcNetBound(b, port, !udpOnly) {
			return true, nil
		}
	}
	return false, nil
}

// serverUDPOnly reports whether d's server for test binds only UDP (see
// Servers): sockperf's for udp_lat does; qperf and iperf3 take every test
// over a TCP control connection.
func serverUDPOnly(d Driver, test string) bool {
	servers, err := Servers(d, 0)
	if err != nil {
		return false
	}
	for _, s := range servers {
		if slices.Contains(s.Tests, test) {
			return s.UDPOnly
		}
	}
	return false
}

// ParseProcNetBound reports whether a /proc/net/{tcp,udp}[6] table has a
// socket on local port port: in state LISTEN (0A) for TCP, any state for UDP.
func ParseProcNetBound(table []byte, port int, tcp bool) bool {
	sc := bufio.NewScanner(bytes.NewReader(table))
	first := true
	for sc.Scan() {
		if first { // header line
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		if i < 0 {
			continue
		}
		lp, err := strconv.ParseUint(f[1][i+1:], 16, 16)
		if err != nil || int(lp) != port {
			continue
		}
		if !tcp || f[3] == "0A" {
			return true
		}
	}
	return false
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// tailLine joins the last few non-empty lines of each text into one line,
// because cnibench's errors are printed as one line.
func tailLine(texts ...string) string {
	var parts []string
	for _, s := range texts {
		lines := strings.Split(strings.TrimSpace(string(StripANSI([]byte(s)))), "\n")
		if len(lines) > 3 {
			lines = lines[len(lines)-3:]
		}
		for _, l := range lines {
			if l = strings.TrimSpace(l); l != "" {
				parts = append(parts, l)
			}
		}
	}
	if len(parts) == 0 {
		return "(no output on stderr)"
	}
	return strings.Join(parts, " | ")
}

// prepare checks that d can run spec here, fills the tool's default port,
// and builds the commands: the server's (only withServer), then the client's.
func prepare(d Driver, spec Spec, withServer bool) (s Spec, srvArgv, cliArgv []string, err error) {
	if err := d.Supports(spec.Test); err != nil {
		return spec, nil, nil, err
	}
	if err := d.Installed(); err != nil {
		return spec, nil, nil, err
	}
	if spec.Port == 0 {
		if p, ok := d.(DefaultPorter); ok {
			spec.Port = p.DefaultPort()
		}
	}
	if spec.Port == 0 {
		return spec, nil, nil, fmt.Errorf("%s: no port given and the driver has no default port", d.Name())
	}
	if withServer {
		if srvArgv, err = d.ServerCommand(spec); err != nil {
			return spec, nil, nil, err
		}
	}
	cliArgv, err = d.ClientCommand(spec)
	return spec, srvArgv, cliArgv, err
}

// startPinned starts c in namespace ns, pinned to cpu when it is set: the
// affinity is inherited through fork and exec and by every thread the
// program starts, so any engine (not only cnibench's) is pinned from its
// first instruction; setting it after the start would race with the
// threads the tool creates.
func startPinned(ns string, cpu *int, c *exec.Cmd) error {
	if cpu == nil {
		return netns.Start(ns, c)
	}
	return netns.StartOn(ns, *cpu, c)
}
