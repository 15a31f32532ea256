package netns

import (
	"bytes"
	"context"
	"os"
	"os/exec"
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
