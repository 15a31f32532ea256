package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/tune"
)

func TestTuneBadInput(t *testing.T) {
	wantUsageErrors(t, []usageCase{
		{[]string{"tune", "apply"}, "--profile latency"},
		{[]string{"tune", "apply", "--profile", "fast"}, `unknown profile "fast"`},
		{[]string{"tune", "apply", "--profile", "latency"}, "add --yes"},
		{[]string{"tune", "apply", "--profile", "latency", "--scope", "moon"}, "bad --scope"},
		{[]string{"tune", "apply", "--profile", "latency", "--scope", "netns:cnb-none-x"}, "no network namespace"},
		{[]string{"tune", "audit", "--only", "net.core.nope"}, `unknown knob "net.core.nope"`},
		{[]string{"tune", "audit", "--profile", "slow"}, `unknown profile "slow"`},
		{[]string{"tune", "rollback", "--journal", "/nonexistent/j.jsonl"}, "--journal /nonexistent/j.jsonl"},
	})
}

func TestTuneAuditFixtureRoot(t *testing.T) {
	root, _ := filepath.Abs("../../pkg/tune/testdata/vm")
	out, err := runCLI(t, "tune", "audit", "--root", root, "--profile", "latency")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cpu.governor", "cannot read", "no cpufreq driver", "vm.transparent_hugepages", "never",
		"not available with --root"} {
		if !strings.Contains(out, want) {
			t.Errorf("audit output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "tune", "audit", "--root", root, "--json", "--only", "net.ipv4.tcp_fastopen")
	if err != nil {
		t.Fatal(err)
	}
	var fs []tune.Finding
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(fs) != 2 || fs[0].Current != "3" || fs[0].Status != tune.StatusOK || fs[1].Status != tune.StatusNoRec {
		t.Errorf("findings: %+v", fs)
	}
}

func TestTuneKnobsMarkdown(t *testing.T) {
	out, err := runCLI(t, "tune", "knobs", "--markdown")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n| `"); n != len(tune.Knobs()) {
		t.Errorf("%d rows for %d knobs", n, len(tune.Knobs()))
	}
}

// TestTuneNetnsEndToEnd drives apply, status and rollback through the CLI
// on a fresh namespace (privileged).
func TestPrivTuneNetnsEndToEnd(t *testing.T) {
	ns := testns.NewNetns(t, "tcli")
	read := func() string {
		var v []byte
		if err := netns.Do(ns, func() (err error) {
			v, err = os.ReadFile("/proc/sys/net/ipv4/tcp_fastopen")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	if err := netns.Do(ns, func() error { return os.WriteFile("/proc/sys/net/ipv4/tcp_fastopen", []byte("1"), 0) }); err != nil {
		t.Fatal(err)
	}
	before := read()
	jdir := t.TempDir()

	out, err := runCLI(t, "tune", "apply", "--profile", "latency", "--scope", "netns:"+ns, "--journal-dir", jdir, "--dry-run")
	if err != nil || !strings.Contains(out, "would change") || read() != before {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	out, err = runCLI(t, "tune", "apply", "--profile", "latency", "--scope", "netns:"+ns, "--journal-dir", jdir)
	if err != nil || !strings.Contains(out, "net.ipv4.tcp_fastopen") || !strings.Contains(out, "journal: ") {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if strings.TrimSpace(read()) != "3" {
		t.Fatalf("tcp_fastopen in %s = %q after apply", ns, read())
	}
	out, err = runCLI(t, "tune", "status", "--journal-dir", jdir)
	if err != nil || !strings.Contains(out, "netns:"+ns) || !strings.Contains(out, "applied") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	out, err = runCLI(t, "tune", "rollback", "--journal-dir", jdir)
	if err != nil || !strings.Contains(out, "from 1 journals") {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	if read() != before {
		t.Fatalf("tcp_fastopen = %q after rollback, want %q", read(), before)
	}
	out, _ = runCLI(t, "tune", "status", "--journal-dir", jdir)
	if !strings.Contains(out, "nothing to roll back") {
		t.Errorf("status after rollback:\n%s", out)
	}
}

// TestTuneLabScope builds a real vxlan lab, audits and applies the latency
// profile in its namespaces only, and rolls back (privileged).
func TestPrivTuneLabScope(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to build a lab (CI runs as root)")
	}
	spec, err := lab.Preset("vxlan")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := lab.Up(ctx, spec, lab.UpOptions{Name: "tunetest-" + runid.New()})
	if errors.Is(err, lab.ErrNotSupported) {
		t.Skipf("vxlan lab: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Down(context.Background()) })
	nss, err := lab.ScopeNamespaces("lab:" + l.Name)
	if err != nil || len(nss) < 2 {
		t.Fatalf("lab namespaces: %v %v", nss, err)
	}
	for _, ns := range nss {
		if err := netns.Do(ns, func() error { return os.WriteFile("/proc/sys/net/ipv4/tcp_fastopen", []byte("1"), 0) }); err != nil {
			t.Fatal(err)
		}
	}
	hostBefore, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_fastopen")

	out, err := runCLI(t, "tune", "audit", "--scope", "lab:"+l.Name, "--profile", "latency")
	if err != nil || !strings.Contains(out, "mtu.consistency") || !strings.Contains(out, "vxlan mtu") {
		t.Fatalf("audit: %v\n%s", err, out)
	}
	jdir := t.TempDir()
	out, err = runCLI(t, "tune", "apply", "--profile", "latency", "--scope", "lab:"+l.Name, "--journal-dir", jdir)
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if n := strings.Count(out, "net.ipv4.tcp_fastopen"); n != len(nss) {
		t.Errorf("tcp_fastopen changed in %d namespaces, want %d:\n%s", n, len(nss), out)
	}
	if strings.Contains(out, "net.core.busy_poll") || strings.Contains(out, "irq.") {
		t.Errorf("lab scope planned host knobs:\n%s", out)
	}
	if b, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_fastopen"); string(b) != string(hostBefore) {
		t.Errorf("host tcp_fastopen changed: %q -> %q", hostBefore, b)
	}
	if _, err := runCLI(t, "tune", "rollback", "--journal-dir", jdir); err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss {
		var b []byte
		_ = netns.Do(ns, func() (err error) { b, err = os.ReadFile("/proc/sys/net/ipv4/tcp_fastopen"); return err })
		if string(b) != "1\n" {
			t.Errorf("%s: tcp_fastopen %q after rollback, want \"1\\n\"", ns, b)
		}
	}
}

func TestTuneVerifyBadInput(t *testing.T) {
	wantUsageErrors(t, []usageCase{
		{[]string{"tune", "verify", "--experiment", "default"}, "needs --profile"},
		{[]string{"tune", "verify", "--profile", "latency"}, "needs --profile"},
		{[]string{"tune", "verify", "--profile", "latency", "--experiment", "default", "--scope", "host"}, "add --yes"},
		{[]string{"tune", "verify", "--profile", "latency", "--experiment", "default", "--scope", "netns:x"}, "bad --scope"},
		{[]string{"tune", "verify", "--profile", "latency", "--experiment", "no-such-exp"}, "no experiment file"},
		{[]string{"tune", "verify", "--profile", "latency", "--experiment", "default", "--arms", "nope"}, `no arm "nope"`},
	})
}

// TestTuneVerifyEndToEnd runs verify on a one-arm experiment with the
// throughput profile in lab scope: two stored runs, a comparison, and every
// journal rolled back (privileged; a few seconds).
func TestPrivTuneVerifyEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to build labs (CI runs as root)")
	}
	// The builtin engine runs the cnibench binary; the test binary is not it.
	if os.Getenv("CNIBENCH_BIN") == "" {
		t.Skip("CNIBENCH_BIN is not set (make test builds bin/cnibench and sets it)")
	}
	dir := t.TempDir()
	db, jdir := filepath.Join(dir, "r.db"), filepath.Join(dir, "j")
	out, err := runCLI(t, "tune", "verify", "--profile", "throughput", "--experiment", "testdata/tune-verify-tiny.yaml",
		"--db", db, "--journal-dir", jdir)
	if err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	for _, want := range []string{"applied in lab", "net.ipv4.tcp_wmem", "A = before, B = after", "tcp_lat", "verdict", "rolled back 1 journals"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	js, err := tune.Journals(jdir)
	if err != nil || len(js) != 1 || !js[0].RolledBack {
		t.Errorf("journals: %+v %v", js, err)
	}
	sdb, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	runs, err := sdb.Runs()
	if err != nil || len(runs) != 2 || runs[0].Kind != store.KindTuneVerify {
		t.Errorf("runs: %+v %v", runs, err)
	}
}
