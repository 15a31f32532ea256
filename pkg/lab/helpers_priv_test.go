package lab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The privileged tests build real labs; these helpers are the bring-up and
// teardown they all share, so that every lab a test builds is taken down
// and checked for leftovers on every path out of the test.

// presetWith returns preset topo with knobs set. A knob the preset refuses
// fails the test: the test would otherwise measure a lab it did not ask for.
func presetWith(t *testing.T, topo string, knobs map[string]string) *Spec {
	t.Helper()
	s, err := Resolve(topo, "", knobs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// upLab brings s up; it fails the test if Up fails, and takes the lab down
// when the test ends (downOnCleanup).
func upLab(t *testing.T, s *Spec) *Lab {
	t.Helper()
	l, err := Up(context.Background(), s, UpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	downOnCleanup(t, l)
	return l
}

// needBuildable skips t unless this host can build topo: root, and the
// registry's probe for it (the daemons and packages it needs) passes.
func needBuildable(t *testing.T, topo string) {
	t.Helper()
	testns.NeedRoot(t)
	s, _ := Preset(topo)
	tp, err := lookupTopology(topo)
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.probe(context.Background(), s, ""); err != nil {
		t.Skip(err.Error())
	}
}

// upPreset brings preset p up as upLab does, with a PMD that sleeps when
// idle. It skips where the host has no OVS or the kernel lacks a feature p
// needs: TestPrivMissingKernelFeature covers that refusal.
func upPreset(t *testing.T, p string) *Lab {
	t.Helper()
	if strings.HasPrefix(p, "ovs") {
		needOVS(t)
	}
	s := presetWith(t, p, quietPMD(p))
	l, err := Up(context.Background(), s, UpOptions{})
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("%v (TestPrivMissingKernelFeature covers this)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	downOnCleanup(t, l)
	return l
}

// downOnCleanup takes the lab down when the test ends, on every path, and
// checks nothing of it is left. Down is idempotent, so a test that takes
// the lab down itself still calls this for its failure paths.
func downOnCleanup(t *testing.T, l *Lab) {
	t.Helper()
	t.Cleanup(func() {
		if err := l.Down(context.Background()); err != nil {
			t.Errorf("cleanup: down: %v", err)
		}
		assertClean(t, l.ID)
	})
}

// pinID makes the labs Up builds until the test ends take one fresh run
// id, returned, so that the test can look for the leftovers of an Up that
// failed and returned no lab.
func pinID(t *testing.T) string {
	t.Helper()
	id := runid.New()
	old := newID
	newID = func() string { return id }
	t.Cleanup(func() { newID = old })
	return id
}

// endpointPairs lists the pairs of l's endpoints that carry traffic:
// client to server, and node1 to node2 where the lab has nodes.
func endpointPairs(l *Lab) [][2]string {
	pairs := [][2]string{{"client", "server"}}
	if _, err := l.Endpoint("node1"); err == nil {
		pairs = append(pairs, [2]string{"node1", "node2"})
	}
	return pairs
}

// echoBoth carries TCP (size bytes) and UDP from namespace from to echo
// servers at addr in namespace to, and checks both come back.
func echoBoth(t *testing.T, from, to, addr string, size int) {
	t.Helper()
	echoTCP(t, to, addr)
	echoUDP(t, to, addr)
	roundTrip(t, from, addr, size)
	udpRoundTrip(t, from, addr)
}

// startMeter starts l's datapath meter; a lab without one fails the test,
// with why as the message.
func startMeter(t *testing.T, l *Lab, why string) *DatapathMeter {
	t.Helper()
	m := l.DatapathMeter()
	if m == nil {
		t.Fatal(why)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m
}

// nftIn returns an nftables connection to namespace ns. The namespace's
// file stays open until the test ends: the connection opens its netlink
// socket through it at each call.
func nftIn(t *testing.T, ns string) *nftables.Conn {
	t.Helper()
	f, err := os.Open(netns.Path(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// countedPackets sums the packets the counters of rules saw.
func countedPackets(rules []*nftables.Rule) uint64 {
	var n uint64
	for _, r := range rules {
		for _, e := range r.Exprs {
			if ctr, ok := e.(*expr.Counter); ok {
				n += ctr.Packets
			}
		}
	}
	return n
}

// killLabUp starts the built binary's `lab up ARGS --name name -q`, reads
// the lab's state file as it goes, and kills the process with SIGKILL once
// killNow says so of the state read (called for each read). It returns
// the lab's run id and what the command printed; a command that never
// wrote its state fails the test.
func killLabUp(t *testing.T, bin, name string, args []string, killNow func(*Lab) bool) (id, out string) {
	t.Helper()
	cmd := exec.Command(bin, append(append([]string{"lab", "up"}, args...), "--name", name, "-q")...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if l, err := Get(name); err == nil {
			id = l.ID
			if killNow(l) {
				break
			}
		}
	}
	_ = cmd.Process.Signal(unix.SIGKILL)
	_ = cmd.Wait()
	if id == "" {
		t.Fatalf("lab up never wrote its state: %s", b.String())
	}
	return id, b.String()
}

// labClean runs the built binary's `lab clean --id id` and returns what it
// printed; a failing clean fails the test.
func labClean(t *testing.T, bin, id string) string {
	t.Helper()
	co, err := exec.Command(bin, "lab", "clean", "--id", id).CombinedOutput()
	if err != nil {
		t.Fatalf("lab clean: %v\n%s", err, co)
	}
	return string(co)
}
