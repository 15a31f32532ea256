package experiment

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
	"golang.org/x/sys/unix"
)

// Ctrl-C in the middle of `cnibench run` (and a supervisor's SIGTERM, and a
// closed terminal's SIGHUP): the finished samples are stored, the run is
// marked incomplete, and no lab is left on the host.
func TestPrivRunInterrupted(t *testing.T) {
	for _, sig := range []unix.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) { runInterrupted(t, sig) })
	}
}

func runInterrupted(t *testing.T, sig unix.Signal) {
	testns.NeedRoot(t)
	bin := testns.Binary(t)
	dir := t.TempDir()
	exp := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(exp, []byte(`
name: long
tests: [tcp_lat]
duration: 500ms
warmup: 0s
repeats: 50
arms:
  - name: veth
    topology: veth
  - name: bridge
    topology: bridge
`), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "r.db")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "run", exp, "--db", db, "--format", "none")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for a few finished steps, then interrupt.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "[3/100]") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("no progress within 60s:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(sig)
	err := cmd.Wait()
	if err == nil {
		t.Fatalf("interrupted run exited 0:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "run interrupted") {
		t.Errorf("no interruption message:\n%s", stderr.String())
	}

	s, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.GetRun("last")
	if err != nil {
		t.Fatal(err)
	}
	samples, err := s.Samples(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Complete || !strings.Contains(run.Status, "interrupted") || len(samples) < 3 || len(samples) >= 100 {
		t.Fatalf("run complete=%v status=%q samples=%d", run.Complete, run.Status, len(samples))
	}
	for _, x := range samples {
		if x.Error != "" {
			t.Errorf("a stored sample is a failure: %s", x.Error)
		}
	}
	// The labs named in the log must be gone.
	for _, line := range strings.Split(stderr.String(), "\n") {
		if !strings.HasPrefix(line, "lab ") || !strings.Contains(line, " up (") {
			continue
		}
		name := strings.Fields(line)[1] // e.g. veth-ab12
		id := name[strings.LastIndex(name, "-")+1:]
		if left, _ := netns.List(runid.Prefix + id + "-"); len(left) > 0 {
			t.Errorf("lab %s left namespaces after Ctrl-C: %v", name, left)
		}
		if _, err := os.Stat("/run/cnibench/labs/" + name + ".json"); err == nil {
			t.Errorf("lab %s left its state file", name)
		}
	}
}
