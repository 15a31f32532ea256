package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/runid"
	"golang.org/x/sys/unix"
)

// runBin runs the binary and returns combined output and exit code.
func runBin(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

// runBinStdout runs the built binary with args and returns its stdout and
// stderr apart, for a command whose stdout is a document (--json).
func runBinStdout(t *testing.T, bin string, args ...string) (stdout []byte, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var e bytes.Buffer
	cmd.Stderr = &e
	stdout, err = cmd.Output()
	return stdout, e.String(), err
}

// startBin starts the built binary with args in the background (a server)
// and kills it when the test ends.
func startBin(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

func TestLabUsageErrors(t *testing.T) {
	wantUsageErrors(t, []usageCase{
		{[]string{"lab", "up", "flannel"}, `unknown preset "flannel" (presets: host, veth`},
		{[]string{"lab", "up", "veth", "--set", "mtu=abc"}, `knob mtu: bad value "abc"`},
		{[]string{"lab", "up", "veth", "--set", "mtu"}, `want key=value`},
		{[]string{"lab", "up", "vxlan", "--set", "turbo=on"}, `unknown knob "turbo"`},
	})
}

func TestPrivLabCommands(t *testing.T) {
	testns.NeedRoot(t)
	bin := testns.Binary(t)
	name := "cli-" + runid.New()
	out, code := runBin(t, bin, "lab", "up", "veth", "--name", name, "--set", "mtu=1400")
	if code != 0 || !strings.Contains(out, "lab "+name+" up (veth, 2 pods) in ") {
		t.Fatalf("lab up: exit %d\n%s", code, out)
	}
	t.Cleanup(func() { runBin(t, bin, "lab", "down", name) })

	out, code = runBin(t, bin, "lab", "show", name, "--json")
	var l lab.Lab
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || l.PodMTU != 1400 || l.Endpoints["server"].IP != "10.244.1.11" {
		t.Fatalf("lab show --json: exit %d\n%s", code, out)
	}
	if out, _ := runBin(t, bin, "lab", "list"); !strings.Contains(out, name) {
		t.Errorf("lab list lacks %s:\n%s", name, out)
	}
	// The child runs in the pod's namespace and its exit status comes back.
	out, code = runBin(t, bin, "lab", "exec", name, "client", "--", "sh", "-c", "readlink /proc/self/ns/net; exit 7")
	if code != 7 {
		t.Errorf("lab exec exit code %d, want 7\n%s", code, out)
	}
	var st unix.Stat_t
	if err := unix.Stat("/run/netns/"+l.Endpoints["client"].Netns, &st); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("net:[%d]", st.Ino); !strings.Contains(out, want) {
		t.Errorf("lab exec ran outside the client namespace: %q, want %s", out, want)
	}
	// Signals sent to `lab exec` reach the command (as with `ip netns
	// exec`), and its status is passed on.
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGHUP, unix.SIGINT} {
		cmd := exec.Command(bin, "lab", "exec", name, "server", "--", "sh", "-c",
			fmt.Sprintf("trap 'exit %d' %s; echo ready; while :; do sleep 0.05; done", 40+int(sig), map[unix.Signal]string{unix.SIGTERM: "TERM", unix.SIGHUP: "HUP", unix.SIGINT: "INT"}[sig]))
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 6)
		if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "ready\n" {
			t.Fatalf("lab exec child not ready: %q %v", buf, err)
		}
		_ = cmd.Process.Signal(sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 40+int(sig) {
				t.Errorf("%v to lab exec: %v, want the command's trap status %d", sig, err, 40+int(sig))
			}
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("%v to lab exec did not reach its command within 5 s", sig)
		}
	}
	if out, code := runBin(t, bin, "lab", "exec", name, "nosuch", "--", "true"); code != 2 || !strings.Contains(out, "endpoints: client, server") {
		t.Errorf("unknown endpoint: exit %d %s", code, out)
	}
	out, code = runBin(t, bin, "lab", "down", name)
	if code != 0 || !strings.Contains(out, "lab "+name+" down in ") {
		t.Errorf("lab down: exit %d\n%s", code, out)
	}
	if out, code := runBin(t, bin, "lab", "down", name); code != 0 || !strings.Contains(out, "not found, nothing to remove") {
		t.Errorf("second down: exit %d %s", code, out)
	}
}
