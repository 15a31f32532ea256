package disrupt

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
)

// udpAnswered reports whether a datagram from ns a to addr is echoed
// within 300 ms.
func udpAnswered(t *testing.T, a string, addr *net.UDPAddr) bool {
	t.Helper()
	var ok bool
	err := netns.Do(a, func() error {
		c, err := net.DialUDP("udp4", nil, addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		_, err = c.Read(make([]byte, 8))
		ok = err == nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// tableIn reports whether ns holds the IPv4 table name.
func tableIn(t *testing.T, ns, name string) bool {
	t.Helper()
	c, done, err := nftIn(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if x.Name == name {
			return true
		}
	}
	return false
}

// TestPrivPortBlackhole: the blackhole drops the probes' port and spares
// another; lifted, the port answers again and the table is gone.
func TestPrivPortBlackhole(t *testing.T) {
	p := testns.NewPair(t)
	var echoes []*Echo
	for _, port := range []int{ProbePort, ProbePort + 1} {
		e, err := StartEcho(p.B, port)
		if err != nil {
			t.Fatal(err)
		}
		echoes = append(echoes, e)
	}
	defer func() {
		for _, e := range echoes {
			e.Close()
		}
	}()
	probe := &net.UDPAddr{IP: p.BIP, Port: ProbePort}
	other := &net.UDPAddr{IP: p.BIP, Port: ProbePort + 1}
	if !udpAnswered(t, p.A, probe) || !udpAnswered(t, p.A, other) {
		t.Fatal("echo not answering before the blackhole")
	}
	const table = "cnbtest-blackhole"
	var lift func() error
	if err := netns.Do(p.B, func() (err error) { lift, err = PortBlackhole(table, ProbePort); return err }); err != nil {
		t.Fatal(err)
	}
	if udpAnswered(t, p.A, probe) {
		t.Error("the probes' port answered through the blackhole")
	}
	if !udpAnswered(t, p.A, other) {
		t.Error("another port was dropped by the blackhole")
	}
	if !tableIn(t, p.B, table) {
		t.Error("no blackhole table while it holds")
	}
	if err := lift(); err != nil {
		t.Fatal(err)
	}
	if tableIn(t, p.B, table) {
		t.Error("blackhole table left after lift")
	}
	if !udpAnswered(t, p.A, probe) {
		t.Error("the probes' port does not answer after lift")
	}
}

// TestPrivPortBlackholeDiesWithProcess: a process killed (SIGKILL) while
// its blackhole holds leaves no table: the kernel deleted the owned table
// with the process's socket.
func TestPrivPortBlackholeDiesWithProcess(t *testing.T) {
	if ns := os.Getenv("CNB_TEST_BLACKHOLE_NS"); ns != "" {
		// The child: hold the blackhole until killed.
		if err := netns.Do(ns, func() error { _, err := PortBlackhole("cnbtest-blackhole", ProbePort); return err }); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("ready\n")
		time.Sleep(time.Minute)
		return
	}
	ns := testns.NewNetns(t, "bh")
	cmd := exec.Command(os.Args[0], "-test.run=^TestPrivPortBlackholeDiesWithProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "CNB_TEST_BLACKHOLE_NS="+ns)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "ready" {
			ready = true
			break
		}
	}
	if !ready {
		t.Fatal("the child never held its blackhole")
	}
	if !tableIn(t, ns, "cnbtest-blackhole") {
		t.Fatal("no table while the child holds it")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if tableIn(t, ns, "cnbtest-blackhole") {
		t.Error("the blackhole table outlived its process")
	}
}
