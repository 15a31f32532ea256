package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/fixture"
	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

// leftovers lists every host object of run id that still exists.
func leftovers(t *testing.T, id string) []string {
	t.Helper()
	var out []string
	prefix := runid.Prefix + id + "-"
	nss, err := netns.List(prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nss {
		out = append(out, "netns "+n)
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, prefix) {
			out = append(out, "link "+l.Attrs().Name)
		}
	}
	if c, err := nftables.New(); err == nil {
		ts, _ := c.ListTables()
		for _, tb := range ts {
			if tb.Name == nameOfTable(id) {
				out = append(out, "nft table "+tb.Name)
			}
		}
	}
	if hostOVSRunning() {
		o, err := exec.Command("ovs-vsctl", "--timeout=5", "list-br").Output()
		if err == nil {
			for _, br := range strings.Fields(string(o)) {
				if strings.HasPrefix(br, prefix) {
					out = append(out, "ovs bridge "+br)
				}
			}
		}
	}
	if ents, err := os.ReadDir(privOVSRoot); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				out = append(out, "ovs dir "+e.Name())
			}
		}
	}
	labs, _ := List()
	for _, l := range labs {
		if l.ID == id {
			out = append(out, "state "+l.Name)
		}
	}
	// Daemons of its private OVS/OVN instances, and their DPDK runtime
	// directories.
	for _, pid := range pidsMentioning(filepath.Join(privOVSRoot, prefix)) {
		out = append(out, fmt.Sprintf("process %d", pid))
	}
	if ents, err := os.ReadDir(dpdkRunDir); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				out = append(out, "dpdk dir "+e.Name())
			}
		}
	}
	return out
}

func assertClean(t *testing.T, id string) {
	t.Helper()
	if left := leftovers(t, id); len(left) > 0 {
		t.Errorf("leftovers of cnb-%s: %v", id, left)
	}
}

// socketIn opens a socket inside namespace ns; what names it in the
// failure. The socket belongs to ns for its life, so using it need not
// stay in netns.Do.
func socketIn[S any](t *testing.T, ns, what string, open func() (S, error)) S {
	t.Helper()
	var sock S
	if err := netns.Do(ns, func() (err error) { sock, err = open(); return }); err != nil {
		t.Fatalf("%s in %s: %v", what, ns, err)
	}
	return sock
}

// echoTCP starts a TCP echo server on ip:port inside ns.
func echoTCP(t *testing.T, ns, addr string) {
	t.Helper()
	ln := socketIn(t, ns, "tcp listen "+addr, func() (net.Listener, error) { return net.Listen("tcp4", addr) })
	fixture.Serve(t, ln, func(c net.Conn) { defer c.Close(); _, _ = io.Copy(c, c) })
}

// echoUDP starts a UDP echo server on ip:port inside ns.
func echoUDP(t *testing.T, ns, addr string) {
	t.Helper()
	pc := socketIn(t, ns, "udp listen "+addr, func() (net.PacketConn, error) { return net.ListenPacket("udp4", addr) })
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
}

// roundTrip sends size bytes over TCP from ns to addr and checks the echo.
func roundTrip(t *testing.T, ns, addr string, size int) {
	t.Helper()
	c := socketIn(t, ns, "tcp dial "+addr, func() (net.Conn, error) { return net.DialTimeout("tcp4", addr, 3*time.Second) })
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := bytes.Repeat([]byte("cnibench"), size/8)
	go func() { _, _ = c.Write(msg) }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("tcp echo %s from %s: %v", addr, ns, err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("tcp echo %s from %s: corrupted data", addr, ns)
	}
}

// udpRoundTrip sends datagrams from ns to addr until one echo returns.
func udpRoundTrip(t *testing.T, ns, addr string) {
	t.Helper()
	c := socketIn(t, ns, "udp dial "+addr, func() (net.Conn, error) { return net.Dial("udp4", addr) })
	defer c.Close()
	buf := make([]byte, 2000)
	msg := bytes.Repeat([]byte("u"), 1000)
	for i := 0; i < 10; i++ {
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("udp send: %v", err)
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(buf)
		if err == nil && n == len(msg) {
			return
		}
	}
	t.Fatalf("udp %s from %s: no echo in 10 tries", addr, ns)
}

func needOVS(t *testing.T) {
	if err := probeOVS(context.Background()); err != nil {
		t.Skip(err.Error())
	}
}

// TestPresets builds each preset, carries TCP and UDP from client to server
// (and node1 to node2), tears it down and checks nothing is left.
func TestPrivPresets(t *testing.T) {
	testns.HostWide(t)
	testns.NeedRoot(t)
	for _, p := range Presets() {
		t.Run(p, func(t *testing.T) {
			l := upPreset(t, p)
			// Cleanups run last first: this Down comes before the one of
			// upPreset, which must then succeed too (Down is idempotent).
			t.Cleanup(func() {
				if err := l.Down(context.Background()); err != nil {
					t.Error(err)
				}
			})
			if got, err := Get(l.Name); err != nil || !got.Complete || got.ID != l.ID {
				t.Fatalf("state: %v %+v", err, got)
			}
			for i, pr := range endpointPairs(l) {
				from, _ := l.Endpoint(pr[0])
				to, _ := l.Endpoint(pr[1])
				echoBoth(t, from.Netns, to.Netns, net.JoinHostPort(to.IP, fmt.Sprint(17420+i)), 256<<10)
			}
		})
	}
}

// TestKnobs checks that knobs reach the kernel and traffic still flows,
// including through a service VIP.
func TestPrivKnobs(t *testing.T) {
	testns.HostWide(t)
	testns.NeedRoot(t)
	for _, topo := range []string{"vxlan", "native", "veth", "bridge", "macvlan", "ovs-netdev"} {
		t.Run(topo, func(t *testing.T) {
			if strings.HasPrefix(topo, "ovs") {
				needOVS(t)
			}
			l := upLab(t, presetWith(t, topo, map[string]string{"conntrack": "on", "notrack": "10.244.9.0/24", "services": "20",
				"offloads": "gro=off,tso=off", "mtu": "1400"}))
			c, _ := l.Endpoint("client")
			srv, _ := l.Endpoint("server")
			echoTCP(t, srv.Netns, net.JoinHostPort(srv.IP, "17430"))
			roundTrip(t, c.Netns, net.JoinHostPort(l.ServiceIP, "17430"), 64<<10)

			h, err := netns.Handle(c.Netns)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			eth, err := h.LinkByName("eth0")
			if err != nil || eth.Attrs().MTU != 1400 {
				t.Fatalf("client eth0 MTU: %v %v", err, eth)
			}
			// The stateful rule is where the topology says: nodes or server.
			ruleNS := srv.Netns
			if n1, err := l.Endpoint("node1"); err == nil {
				ruleNS = n1.Netns
			}
			conn := nftIn(t, ruleNS)
			tb, err := conn.ListTableOfFamily(nameOfTable(l.ID), nftables.TableFamilyIPv4)
			if err != nil {
				t.Fatalf("nft table in %s: %v", ruleNS, err)
			}
			chains, _ := conn.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
			want := map[string]bool{"conntrack": false, "notrack-pre": false}
			for _, ch := range chains {
				if ch.Table.Name == tb.Name {
					if _, ok := want[ch.Name]; ok {
						want[ch.Name] = true
					}
				}
			}
			for ch, found := range want {
				if !found {
					t.Errorf("chain %s missing in %s", ch, ruleNS)
				}
			}
		})
	}
}

// TestMissingKernelFeature: a tunnel the kernel lacks gives ErrNotSupported,
// names the kernel option, and leaves nothing (not even a state file).
func TestPrivMissingKernelFeature(t *testing.T) {
	testns.NeedRoot(t)
	tested := 0
	for _, topo := range []string{"geneve", "ipip"} {
		s, _ := Preset(topo)
		id := pinID(t)
		l, err := Up(context.Background(), s, UpOptions{Name: "missing-" + id})
		if err == nil {
			t.Logf("%s is supported by this kernel; nothing to check", topo)
			_ = l.Down(context.Background())
			assertClean(t, id)
			continue
		}
		tested++
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "CONFIG_") || !strings.Contains(err.Error(), "nothing was created") {
			t.Errorf("%s: %v", topo, err)
		}
		assertClean(t, id)
		if _, err := os.Stat(statePath("missing-" + id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: state file left: %v", topo, err)
		}
	}
	if tested == 0 {
		t.Skip("this kernel has geneve and ipip")
	}
}

// TestUpCancelled: Ctrl-C (ctx cancel) in the middle of Up removes what
// was created.
func TestPrivUpCancelled(t *testing.T) {
	testns.NeedRoot(t)
	s := presetWith(t, "bridge", map[string]string{"nodes": "2", "pods_per_node": "40"})
	id := pinID(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once some namespaces exist.
		for i := 0; i < 2000; i++ {
			if nss, _ := netns.List(runid.Prefix + id + "-"); len(nss) > 5 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	l, err := Up(ctx, s, UpOptions{})
	if err == nil {
		_ = l.Down(context.Background())
		t.Skip("Up finished before the cancel arrived")
	}
	if !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("want interrupted error, got %v", err)
	}
	assertClean(t, id)
}

func TestPrivBuildFailureUndoes(t *testing.T) {
	testns.NeedRoot(t)
	s, _ := Preset("native")
	id := pinID(t)
	// A namespace the lab wants already exists: Up must fail and remove
	// only what it created, not the intruder.
	intruder := runid.Name(id, "server")
	if err := netns.Create(intruder); err != nil {
		t.Fatal(err)
	}
	defer netns.Delete(intruder)
	_, err := Up(context.Background(), s, UpOptions{})
	if err == nil || !strings.Contains(err.Error(), "everything created was removed") {
		t.Fatalf("want failure, got %v", err)
	}
	left := leftovers(t, id)
	// Known limitation: the intruder carries our name, so Down removes it;
	// what matters is that nothing else is left.
	for _, x := range left {
		if x != "netns "+intruder {
			t.Errorf("leftover %s", x)
		}
	}
}

// TestCleanAfterSIGKILL kills `cnibench lab up` (mid-way and after it
// finished) and checks `cnibench lab clean --id` removes everything.
func TestPrivCleanAfterSIGKILL(t *testing.T) {
	testns.NeedRoot(t)
	bin := testns.Binary(t)
	topo := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(topo, []byte("topology: bridge\nnodes: 2\npods_per_node: 50\nknobs:\n  conntrack: on\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, when := range []string{"midway", "after"} {
		t.Run(when, func(t *testing.T) {
			name := "killed-" + runid.New()
			// A different moment each run: after 1..100 of its 102 namespaces.
			killAt := 1 + rand.IntN(100)
			t.Logf("killing after %d namespaces", killAt)
			id, out := killLabUp(t, bin, name, []string{topo}, func(l *Lab) bool {
				if when == "midway" {
					nss, _ := netns.List(runid.Prefix + l.ID + "-")
					return len(nss) >= killAt
				}
				return l.Complete
			})
			if len(leftovers(t, id)) == 0 {
				t.Fatalf("nothing existed at kill time; the test proves nothing (%s)", out)
			}
			if co := labClean(t, bin, id); !strings.Contains(co, "removed") {
				t.Errorf("clean output: %s", co)
			}
			assertClean(t, id)
			if _, err := os.Stat(statePath(name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state file left: %v", err)
			}
		})
	}
}

// TestPresetsEngineTraffic runs the real engine (cnibench server/client,
// started inside the endpoints' namespaces) across every preset that this
// kernel supports: tcp_lat and udp_lat, client to server and node to node.
func TestPrivPresetsEngineTraffic(t *testing.T) {
	testns.HostWide(t)
	testns.NeedRoot(t)
	bin := testns.Binary(t)
	for _, p := range Presets() {
		t.Run(p, func(t *testing.T) {
			l := upPreset(t, p)
			for _, pr := range endpointPairs(l) {
				from, _ := l.Endpoint(pr[0])
				to, _ := l.Endpoint(pr[1])
				srv := exec.Command(bin, "server", "--quiet", "--listen", net.JoinHostPort(to.IP, "7420"))
				if err := netns.Start(to.Netns, srv); err != nil {
					t.Fatal(err)
				}
				cli := exec.Command(bin, "client", "--server", to.IP, "--test", "tcp_lat,udp_lat",
					"--duration", "300ms", "--warmup", "100ms", "--json")
				var out, stderr bytes.Buffer
				cli.Stdout, cli.Stderr = &out, &stderr
				var err error
				for try := 0; try < 20; try++ { // until the server listens
					out.Reset()
					stderr.Reset()
					cli = exec.Command(cli.Path, cli.Args[1:]...)
					cli.Stdout, cli.Stderr = &out, &stderr
					if err = netns.Start(from.Netns, cli); err == nil {
						err = cli.Wait()
					}
					if err == nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				_ = srv.Process.Kill()
				_ = srv.Wait()
				if err != nil {
					t.Fatalf("%s -> %s: cnibench client: %v\n%s", pr[0], pr[1], err, stderr.String())
				}
				set, err := result.DecodeSet(out.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				if len(set.Results) != 2 {
					t.Fatalf("%d results, want 2", len(set.Results))
				}
				for _, r := range set.Results {
					if r.Latency == nil || r.Latency.RTTNs.Count == 0 {
						t.Errorf("%s -> %s %s: no round trips measured", pr[0], pr[1], r.Test)
						continue
					}
					t.Logf("%s -> %s %s: %d round trips", pr[0], pr[1], r.Test, r.Latency.RTTNs.Count)
				}
			}
		})
	}
}

// TestLabsCoexist: two labs with the same addresses run side by side,
// because every address lives inside the lab's own namespaces.
func TestPrivLabsCoexist(t *testing.T) {
	testns.NeedRoot(t)
	var labs []*Lab
	for i := 0; i < 2; i++ {
		labs = append(labs, upLab(t, presetWith(t, "vxlan", nil)))
	}
	for i, l := range labs {
		c, _ := l.Endpoint("client")
		srv, _ := l.Endpoint("server")
		if srv.IP != labs[0].Endpoints["server"].IP {
			t.Fatalf("labs differ in addresses; the test wants them equal")
		}
		addr := net.JoinHostPort(srv.IP, fmt.Sprint(17450+i))
		echoTCP(t, srv.Netns, addr)
		roundTrip(t, c.Netns, addr, 4096)
	}
}

// TestOVSSockBuf: OVS's packet sockets on the lab's ports get the asked
// buffer size, and the host's socket defaults are back afterwards.
func TestPrivOVSSockBuf(t *testing.T) {
	testns.HostWide(t)
	testns.NeedRoot(t)
	needOVS(t)
	if _, err := exec.LookPath("ss"); err != nil {
		t.Skip("needs ss (iproute2) to read socket buffers")
	}
	privateState(t)
	before := rawSysctl(t, "net/core/rmem_default")
	l := upLab(t, presetWith(t, "ovs-netdev", map[string]string{"ovs_sock_buf": "33554432"}))
	if now := rawSysctl(t, "net/core/rmem_default"); now != before {
		t.Errorf("host rmem_default %q while the lab is up, want %q back", now, before)
	}
	if held, err := l.Changes(); err != nil || l.ChangesHost() {
		t.Errorf("journal still holds a host change: %+v %v", held, err)
	}
	out, err := exec.Command("ss", "-0", "-m", "-n").Output()
	if err != nil {
		t.Fatal(err)
	}
	// Each packet socket is two lines: the socket, then its skmem.
	lines := strings.Split(string(out), "\n")
	found := 0
	for i, ln := range lines {
		for _, port := range l.HostLinks {
			if strings.Contains(ln, ":"+port+" ") && i+1 < len(lines) {
				if !strings.Contains(lines[i+1]+ln, "rb33554432") {
					t.Errorf("socket on %s: %s %s", port, ln, lines[i+1])
				}
				found++
			}
		}
	}
	if found != 2 {
		t.Errorf("found %d OVS packet sockets on the lab's ports, want 2:\n%s", found, out)
	}
}

// TestPrivCleanSparesLiveRun: `lab clean` on a shared machine leaves the
// labs of a process that is still running (another `cnibench run`
// measuring), says so and exits non-zero; once that process is gone the
// same clean removes them. A pid reused by a process that started after the
// lab was created is not its owner.
func TestPrivCleanSparesLiveRun(t *testing.T) {
	testns.NeedRoot(t)
	bin := testns.Binary(t)
	owner := exec.Command("sleep", "120")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = owner.Process.Kill(); _ = owner.Wait() }()
	time.Sleep(20 * time.Millisecond) // the lab is created after its owner started
	name := "live-" + runid.New()
	if out, err := exec.Command(bin, "lab", "up", "veth", "--name", name).CombinedOutput(); err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	l, err := Get(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = CleanID(context.Background(), l.ID) }()
	l.PID = owner.Process.Pid
	if err := l.save(); err != nil {
		t.Fatal(err)
	}
	// Only --id: a test must not sweep what parallel tests (or others on
	// this host) have up; Clean and CleanID share the rule (clean()).
	for _, args := range [][]string{{"lab", "clean", "--id", l.ID}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), fmt.Sprintf("process %d (sleep) that built it still runs", owner.Process.Pid)) {
			t.Errorf("%v with the owner running: %v\n%s", args, err, out)
		}
		if len(leftovers(t, l.ID)) == 0 {
			t.Fatalf("%v removed a running process's lab:\n%s", args, out)
		}
	}
	// A process started after the lab was made cannot be its builder.
	late := exec.Command("sleep", "120")
	if err := late.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = late.Process.Kill(); _ = late.Wait() }()
	l.PID, l.Created = late.Process.Pid, time.Now().Add(-time.Hour)
	if err := l.save(); err != nil {
		t.Fatal(err)
	}
	labClean(t, bin, l.ID)
	assertClean(t, l.ID)
}

// TestPrivDownStopsWhatRunsInside: a process started in a lab's namespace
// by someone else (a server under `lab exec`) is stopped by Down, not left
// running in a namespace without a name.
func TestPrivDownStopsWhatRunsInside(t *testing.T) {
	testns.NeedRoot(t)
	l := upLab(t, presetWith(t, "veth", nil))
	ns := l.Namespaces[0]
	cmd := exec.Command("sleep", "600")
	if err := netns.Start(ns, cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if pids, err := netns.Pids(ns); err != nil || !slices.Contains(pids, cmd.Process.Pid) {
		t.Fatalf("sleep %d not seen in %s: %v %v", cmd.Process.Pid, ns, pids, err)
	}
	if err := l.Down(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("sleep %d still runs after Down", cmd.Process.Pid)
	}
}
