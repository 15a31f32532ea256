package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
)

// Other tools create namespaces beside cnibench with iproute2, which binds
// /run/netns onto itself before its first one. These tests run the built
// binary in a private mount namespace whose /run is a fresh tmpfs, so
// /run/netns starts as a plain directory (as on a freshly booted machine)
// whatever the host's looks like, and nothing they mount there is seen by
// the host or outlives them: the mount namespace, and with it every
// namespace mounted in it, ends with the script.
func inFreshRun(t *testing.T, script string) (string, error) {
	t.Helper()
	testns.NeedRoot(t)
	for _, tool := range []string{"unshare", "ip", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	full := "set -eu\nmount -t tmpfs cnb-test-run /run\nmkdir /run/netns\n" +
		"trap 'touch \"$DIR/stop\"; wait; \"$BIN\" lab clean >/dev/null 2>&1 || true' EXIT\n" + script
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", full)
	cmd.Env = append(os.Environ(), "BIN="+testns.Binary(t), "DIR="+dir,
		"CNIBENCH_DB="+filepath.Join(dir, "r.db"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A lab built on a plain /run/netns, then another tool's `ip netns add`:
// the lab still goes down completely.
func TestPrivNetnsBesideIproute2(t *testing.T) {
	out, err := inFreshRun(t, `
"$BIN" lab up veth --name t1 -q >/dev/null
ip netns add other-tool
"$BIN" lab down t1
ip netns del other-tool
echo "left: $(ls /run/netns)"
"$BIN" lab clean
`)
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !strings.Contains(out, "left: \n") {
		t.Errorf("namespaces left in /run/netns:\n%s", out)
	}
}

// A namespace another tool mounted on the plain directory, then hidden by
// iproute2's bind: lab clean cannot remove it, so it must exit non-zero,
// name it and say how to free it.
func TestPrivNetnsShadowedNamed(t *testing.T) {
	out, err := inFreshRun(t, `
touch /run/netns/cnb-zz01-old
unshare --net=/run/netns/cnb-zz01-old true
ip netns add other-tool
"$BIN" lab clean --id zz01 && echo "clean exited 0"
ip netns del other-tool
`)
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if strings.Contains(out, "clean exited 0") {
		t.Errorf("lab clean exited 0 with a namespace left:\n%s", out)
	}
	for _, want := range []string{`"cnb-zz01-old"`, "lies beneath", "umount /run/netns"} {
		if !strings.Contains(out, want) {
			t.Errorf("lab clean output lacks %q:\n%s", want, out)
		}
	}
}

// A whole `cnibench run` while another program adds and deletes
// namespaces with iproute2 in a loop: it exits 0, prints its table and
// leaves nothing.
func TestPrivRunBesideNetnsLoop(t *testing.T) {
	_, _, exp := privExperiment(t, tinyExperiment("beside", "veth", "vxlan"))
	out, err := inFreshRun(t, `
# The loop starts once the labs are up, so its first "ip netns add" binds
# /run/netns over namespaces cnibench has already mounted.
( sleep 0.5; i=0; while [ ! -e "$DIR/stop" ]; do ip netns add loop$i; ip netns del loop$i; i=$((i+1)); done ) &
"$BIN" run `+exp+` --wakeup none
touch "$DIR/stop"; wait
echo "left: $(ls /run/netns)"
`)
	if err != nil {
		t.Fatalf("run beside an ip netns loop: %v:\n%s", err, out)
	}
	if !strings.Contains(out, "left: \n") {
		t.Errorf("namespaces left in /run/netns:\n%s", out)
	}
	if !strings.Contains(out, "vxlan") || !strings.Contains(out, "tcp_lat") {
		t.Errorf("no table printed:\n%s", out)
	}
}
