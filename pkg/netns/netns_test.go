package netns

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/vishvananda/netlink"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (CI runs as root)")
	}
}

func TestPrivCreateDoDelete(t *testing.T) {
	needRoot(t)
	name := runid.Name(runid.New(), "nstest")
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Delete(name) })

	// A dummy link made inside must not be visible outside.
	if err := Do(name, func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "dmy0"}, PeerName: "dmy1"})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName("dmy0"); err == nil {
		t.Fatal("link created in the namespace is visible in the host namespace")
	}
	h, err := Handle(name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.LinkByName("dmy0"); err != nil {
		t.Fatalf("link not found inside: %v", err)
	}

	// A started command runs inside.
	if _, err := exec.LookPath("cat"); err == nil {
		var out bytes.Buffer
		cmd := Command(context.Background(), "cat", "/proc/net/dev")
		cmd.Stdout = &out
		if err := Start(name, cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "dmy0") {
			t.Fatalf("command did not run inside the namespace:\n%s", out.String())
		}
	}

	if err := Delete(name); err != nil {
		t.Fatal(err)
	}
	if Exists(name) {
		t.Fatal("namespace still exists after Delete")
	}
	if err := Delete(name); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
}

// TestDeleteHalfCreated: a Create killed before its bind mount leaves only
// the file under /run/netns; Delete must still remove it.
func TestPrivDeleteHalfCreated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write /run/netns")
	}
	name := "cnb-" + runid.New() + "-half"
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(Path(name), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(Path(name)) })
	if err := Delete(name); err != nil {
		t.Fatal(err)
	}
	if Exists(name) {
		t.Fatal("file still there")
	}
}

// A mountinfo captured after `cnibench lab up` on a plain /run/netns and
// then `ip netns add other-tool` (iproute2 bound /run/netns, id 44, over
// it): cnibench's two mounts hang off the root mount (27), not off 44, so
// they are shadowed; other-tool's is not.
const shadowedMountinfo = `27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
42 27 0:4 net:[4026532177] /run/netns/cnb-t8fn-server rw - nsfs nsfs rw
43 27 0:4 net:[4026532241] /run/netns/cnb-t8fn-client rw - nsfs nsfs rw
44 27 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw,discard
47 44 0:4 net:[4026532317] /run/netns/other-tool rw shared:4 - nsfs nsfs rw
48 27 0:4 net:[4026532318] /run/netns/with\040space rw - nsfs nsfs rw
`

func TestShadowedIn(t *testing.T) {
	m, err := parseMountinfo(strings.NewReader(shadowedMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 6 || m[5].point != "/run/netns/with space" {
		t.Fatalf("parsed %+v", m)
	}
	sh := shadowedIn(m, "/run/netns/cnb-t8fn-server", 44)
	if sh == nil || sh.MountID != 42 || sh.Over != 44 || sh.Name != "cnb-t8fn-server" {
		t.Fatalf("server: %+v", sh)
	}
	if !strings.Contains(sh.String(), "umount /run/netns && cnibench lab clean") {
		t.Errorf("no way to free it in %q", sh)
	}
	if sh := shadowedIn(m, "/run/netns/other-tool", 44); sh != nil {
		t.Errorf("other-tool is reachable, got %+v", sh)
	}
	if sh := shadowedIn(m, "/run/netns/absent", 44); sh != nil {
		t.Errorf("absent: %+v", sh)
	}
	if _, err := parseMountinfo(strings.NewReader("x y\n")); err == nil {
		t.Error("a short line parsed")
	}
}

// TestPrivMainThreadStaysHome: Do and StartOn run on whatever thread the
// scheduler gives them, the process's main thread included. That thread is
// what /proc/self shows; it must come back in the process's own namespace
// and on all its CPUs, or /proc/self/net reads a lab's sockets. The calls
// run in a fresh test process: once any locked call has parked the main
// thread (the old way, wherever it was), later calls never meet it.
func TestPrivMainThreadStaysHome(t *testing.T) {
	needRoot(t)
	if name := os.Getenv("CNB_NETNS_HOME_TEST"); name != "" {
		mainThreadStaysHome(t, name)
		return
	}
	name := runid.Name(runid.New(), "nshome")
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Delete(name) })
	cmd := exec.Command(os.Args[0], "-test.run=^TestPrivMainThreadStaysHome$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "CNB_NETNS_HOME_TEST="+name)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func mainThreadStaysHome(t *testing.T, name string) {
	home, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	status := func() string {
		b, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Cpus_allowed_list:") {
				return l
			}
		}
		return ""
	}
	cpus := status()
	for i := range 100 {
		var err error
		if i%2 == 0 {
			err = Do(name, func() error { return nil })
		} else {
			err = StartOn(name, 0, exec.Command("true"))
		}
		if err != nil {
			t.Fatal(err)
		}
		runtime.Gosched()
		if now, _ := os.Readlink("/proc/self/ns/net"); now != home {
			t.Fatalf("after %d calls the main thread is in %s, not %s", i+1, now, home)
		}
		if now := status(); now != cpus {
			t.Fatalf("after %d calls the main thread has %q, not %q", i+1, now, cpus)
		}
	}
}

// TestDoEmptyIsCallers: Do("") runs fn in the caller's own network
// namespace (a pod's, for the disruption probes), where Do of a missing
// name fails.
func TestDoEmptyIsCallers(t *testing.T) {
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Skipf("no /proc/self/ns/net: %v", err)
	}
	var in string
	if err := Do("", func() error {
		var err error
		in, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatalf("Do(\"\"): %v", err)
	}
	if in != own {
		t.Errorf("Do(\"\") ran in %s, the process is in %s", in, own)
	}
	if err := Do("cnb-no-such-namespace", func() error { return nil }); err == nil {
		t.Error("Do of a missing namespace ran")
	}
}
