package tune

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"golang.org/x/sys/unix"
)

// Privileged tests: they create a fresh network namespace and change the
// per-namespace sysctls inside it only, never the host's.

// netnsKnobs are the writable per-namespace sysctls.
func netnsKnobs(t *testing.T) []*Knob {
	var out []*Knob
	for _, k := range Knobs() {
		if k.Scope == ScopeNetns && !k.AuditOnly {
			out = append(out, k)
		}
	}
	if len(out) < 5 {
		t.Fatalf("only %d per-namespace knobs", len(out))
	}
	return out
}

// lower sets some per-namespace sysctls inside ns below both profiles, so
// apply has several values to change whatever the host's defaults are.
func lower(t *testing.T, ns string) {
	t.Helper()
	err := netns.Do(ns, func() error {
		for p, v := range map[string]string{
			"/proc/sys/net/ipv4/tcp_rmem":               "4096 87380 6291456",
			"/proc/sys/net/ipv4/tcp_wmem":               "4096 16384 4194304",
			"/proc/sys/net/ipv4/tcp_fastopen":           "1",
			"/proc/sys/net/ipv4/tcp_congestion_control": "reno",
		} {
			if err := os.WriteFile(p, []byte(v), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rawValues reads every per-namespace knob's text, exactly, in env's namespace.
func rawValues(t *testing.T, e *Env, ks []*Knob) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, k := range ks {
		curs, err := readKnob(e, k)
		if err != nil {
			t.Fatalf("read %s in %q: %v", k.ID, e.Netns, err)
		}
		m[k.ID] = curs[0].Raw
	}
	return m
}

func TestPrivNetnsApplyRollbackExact(t *testing.T) {
	ns := testns.NewNetns(t, "tune")
	host := DefaultEnv()
	e := host.WithNetns(ns)
	ks := netnsKnobs(t)
	lower(t, ns)
	hostBefore := rawValues(t, host, ks)
	before := rawValues(t, e, ks)
	jdir := t.TempDir()

	var changed int
	for _, p := range Profiles() {
		rep, err := Apply(ApplyOptions{Env: host, Profile: p, Knobs: Knobs(), Netns: []string{ns},
			ScopeLabel: "netns:" + ns, JournalDir: jdir})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rep.Changes {
			if c.Netns != ns {
				t.Errorf("change outside the namespace: %+v", c)
			}
			if c.Error != "" {
				t.Errorf("%s: %s", c.Knob, c.Error)
			}
		}
		changed += len(rep.Changes)
	}
	if changed < 3 {
		t.Fatalf("only %d changes: the test would prove little", changed)
	}
	during := rawValues(t, e, ks)
	if norm(during["net.ipv4.tcp_wmem"]) != "4096 16384 16777216" || norm(during["net.ipv4.tcp_fastopen"]) != "3" {
		t.Errorf("not applied in the namespace: tcp_wmem=%q tcp_fastopen=%q", during["net.ipv4.tcp_wmem"], during["net.ipv4.tcp_fastopen"])
	}
	if got := rawValues(t, host, ks); !maps.Equal(got, hostBefore) {
		t.Fatalf("the host's sysctls changed: before %v after %v", hostBefore, got)
	}

	if _, _, err := RollbackAll(host, jdir); err != nil {
		t.Fatal(err)
	}
	after := rawValues(t, e, ks)
	for id, b := range before {
		if after[id] != b {
			t.Errorf("%s: %q after rollback, want %q (byte-identical)", id, after[id], b)
		}
	}
}

const crashEnv = "CNIBENCH_TUNE_CRASH_CHILD"

// TestCrashChild is not a test on its own: TestPrivCrashMidApply re-runs the test
// binary with crashEnv set, and this function applies a profile inside the
// given namespace and SIGKILLs itself right after the first write.
func TestCrashChild(t *testing.T) {
	spec := os.Getenv(crashEnv)
	if spec == "" {
		t.Skip("helper for TestCrashMidApply")
	}
	ns, jdir, _ := strings.Cut(spec, ",")
	afterWrite = func(n int) {
		if n == 1 {
			_ = unix.Kill(os.Getpid(), unix.SIGKILL)
			select {} // never reached
		}
	}
	_, err := Apply(ApplyOptions{Env: DefaultEnv(), Profile: Throughput, Knobs: Knobs(), Netns: []string{ns},
		ScopeLabel: "netns:" + ns, JournalDir: jdir})
	t.Fatalf("apply returned (%v): the crash hook did not fire", err)
}

func TestPrivCrashMidApply(t *testing.T) {
	ns := testns.NewNetns(t, "tune")
	e := DefaultEnv().WithNetns(ns)
	ks := netnsKnobs(t)
	lower(t, ns)
	before := rawValues(t, e, ks)
	jdir := t.TempDir()

	cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+ns+","+jdir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child did not die: %v\n%s", err, out)
	}
	// exec.ExitError.Sys() is the syscall package's WaitStatus (x/sys/unix has its own, a different type).
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL\n%s", err, out)
	}

	js, err := Journals(jdir)
	if err != nil || len(js) != 1 {
		t.Fatalf("journals after crash: %+v %v", js, err)
	}
	j := js[0]
	if j.Changes != 1 || j.Unfinished != 1 || j.RolledBack {
		t.Fatalf("journal after crash: %+v (want 1 change line, written before its write, without a result)", j)
	}
	es, _ := ReadJournal(j.Path)
	first := es[1]
	k, _ := Lookup(first.Knob)
	mid := rawValues(t, e, []*Knob{k})
	if norm(mid[k.ID]) == norm(before[k.ID]) {
		t.Fatalf("%s unchanged after the crash: the child died before its first write", k.ID)
	}

	if n, err := Rollback(DefaultEnv(), j.Path); err != nil || n != 1 {
		t.Fatalf("rollback after crash: %d, %v", n, err)
	}
	after := rawValues(t, e, ks)
	for id, b := range before {
		if after[id] != b {
			t.Errorf("%s: %q after rollback, want %q", id, after[id], b)
		}
	}
}

// A lab torn down after apply leaves a journal for namespaces that are gone;
// rolling it back succeeds and marks it done.
func TestPrivRollbackNamespaceGone(t *testing.T) {
	ns := testns.NewNetns(t, "tune")
	lower(t, ns)
	jdir := t.TempDir()
	rep, err := Apply(ApplyOptions{Env: DefaultEnv(), Profile: Latency, Knobs: Knobs(), Netns: []string{ns}, JournalDir: jdir})
	if err != nil || len(rep.Changes) == 0 {
		t.Fatalf("apply: %+v %v", rep, err)
	}
	if err := netns.Delete(ns); err != nil {
		t.Fatal(err)
	}
	n, err := Rollback(DefaultEnv(), rep.Journal)
	if err != nil || n != len(rep.Changes) {
		t.Fatalf("rollback: %d %v", n, err)
	}
	js, _ := Journals(jdir)
	if len(js) != 1 || !js[0].RolledBack {
		t.Errorf("journal not marked rolled back: %+v", js)
	}
}
