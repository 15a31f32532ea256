package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/tune"
)

// privateState gives the test its own lab state and journal directory, so
// its state files and journals never meet those of labs other tests
// (privileged or not) build at the same time.
func privateState(t *testing.T) {
	t.Helper()
	old := StateDir
	StateDir = filepath.Join(t.TempDir(), "labs")
	t.Cleanup(func() { StateDir = old })
}

// rawSysctl reads a sysctl of this thread's namespace exactly, newline
// included.
func rawSysctl(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc/sys", key))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rmemMaxHostWide reports whether net.core.rmem_max is host-wide on this
// kernel (read-only inside a fresh namespace), as the lab decides it.
func rmemMaxHostWide(t *testing.T) bool {
	t.Helper()
	ns := runid.Name(runid.New(), "t")
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	defer netns.Delete(ns)
	per, err := nsSysctlWritable(ns, "net.core.rmem_max")
	if err != nil {
		t.Fatal(err)
	}
	return !per
}

// otherThan returns a socket buffer limit that differs from the current one.
func otherThan(raw string) string {
	if strings.TrimSpace(raw) == "8388608" {
		return "4194304"
	}
	return "8388608"
}

// vethRmemMax prepares the tests of a host-wide setting: it gives the test
// its own state, reads the host's rmem_max (before, exactly) and returns a
// veth lab's spec that sets rmem_max to want, another value.
func vethRmemMax(t *testing.T) (s *Spec, before, want string) {
	t.Helper()
	testns.HostWide(t)
	testns.NeedRoot(t)
	privateState(t)
	before = rawSysctl(t, "net/core/rmem_max")
	want = otherThan(before)
	return presetWith(t, "veth", map[string]string{"rmem_max": want}), before, want
}

// rmem_max reaches the kernel; where it is host-wide (this kernel), the
// change is in the lab's journal with the old text exactly as read, the
// state file names the journal, and Down restores the same bytes.
func TestPrivSocketBufferKnobJournaled(t *testing.T) {
	s, before, want := vethRmemMax(t)
	l := upLab(t, s)
	srv, _ := l.Endpoint("server")
	var got string
	_ = netns.Do(srv.Netns, func() error { got = rawSysctl(t, "net/core/rmem_max"); return nil })
	if strings.TrimSpace(got) != want {
		t.Errorf("rmem_max seen in the server pod: %q, want %s", got, want)
	}
	held, err := l.Changes()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := Get(l.Name)
	if err != nil || saved.Journal == "" || saved.Journal != l.Journal || filepath.Dir(l.Journal) != journalDir() {
		t.Fatalf("state file journal %q, lab %q: %v", saved.Journal, l.Journal, err)
	}
	if rmemMaxHostWide(t) {
		if len(held) != 1 || held[0].Knob != tune.KindSysctl || held[0].Target != "net.core.rmem_max" ||
			held[0].Netns != "" || held[0].Old != before || held[0].New != want || !l.ChangesHost() {
			t.Fatalf("journal holds %+v, want the host's rmem_max %q -> %s", held, before, want)
		}
	}
	if err := l.Down(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := rawSysctl(t, "net/core/rmem_max"); after != before {
		t.Errorf("host rmem_max %q after down, want %q", after, before)
	}
	if _, err := os.Stat(l.Journal); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal left after down: %v", err)
	}
	assertClean(t, l.ID)
}

// Every setting a routed lab with offloads changes is journaled: forwarding
// in both nodes and the offloads of every pod and node-side veth.
func TestPrivJournalHoldsEveryChange(t *testing.T) {
	testns.HostWide(t)
	testns.NeedRoot(t)
	privateState(t)
	l := upLab(t, presetWith(t, "vxlan", map[string]string{"offloads": "off"}))
	held, err := l.Changes()
	if err != nil {
		t.Fatal(err)
	}
	var forwarding, offloads int
	for _, c := range held {
		switch {
		case c.Knob == tune.KindSysctl && c.Target == "net.ipv4.ip_forward" && strings.HasPrefix(c.Netns, runid.Prefix+l.ID+"-"):
			forwarding++
		case c.Knob == tune.KindOffloads && c.Netns != "":
			offloads++
		default:
			t.Errorf("unexpected change %+v", c)
		}
	}
	// Two nodes; client and server each with eth0 and a node-side veth.
	if forwarding != 2 || offloads != 4 || l.ChangesHost() {
		t.Errorf("journaled %d forwarding and %d offload changes (host: %v), want 2 and 4 (false): %+v", forwarding, offloads, l.ChangesHost(), held)
	}
}

// Ctrl-C (ctx cancel) right as Up changes a host-wide setting: Up fails,
// and the setting is back, byte for byte, with nothing left.
func TestPrivUpCancelledAfterHostChange(t *testing.T) {
	s, before, want := vethRmemMax(t)
	id := pinID(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen atomic.Bool
	stopWatching := func() {}
	log := writerFunc(func(p []byte) {
		if !strings.Contains(string(p), "host-wide") {
			return
		}
		// The change follows this line: cancel now, and watch the host
		// until Up has returned to prove the change was made.
		cancel()
		stopWatching = testns.Repeat(t, 0, func() {
			if b, err := os.ReadFile("/proc/sys/net/core/rmem_max"); err == nil && strings.TrimSpace(string(b)) == want {
				seen.Store(true)
			}
		})
	})
	l, err := Up(ctx, s, UpOptions{Log: log})
	stopWatching()
	if err == nil {
		downOnCleanup(t, l)
		t.Fatal("Up succeeded after its ctx was cancelled")
	}
	if !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("want an interrupted error, got %v", err)
	}
	// The window between the write and the rollback is a few µs, so the
	// watcher need not catch it on a loaded 2-core machine; what must hold
	// is the restore below, whichever side of the cancel the write fell.
	if rmemMaxHostWide(t) && !seen.Load() {
		t.Log("the raised rmem_max was not caught on the host before the rollback (the window is short)")
	}
	if after := rawSysctl(t, "net/core/rmem_max"); after != before {
		t.Errorf("host rmem_max %q after the cancelled Up, want %q", after, before)
	}
	assertClean(t, id)
	if js, _ := tune.Journals(journalDir()); len(js) != 0 {
		for _, j := range js {
			if j.Held > 0 {
				t.Errorf("journal %s still holds %d changes", j.Path, j.Held)
			}
		}
	}
}

// Two labs cannot hold one host-wide setting: the second Up is refused
// (tune.ErrHeld) and leaves nothing, the first keeps its value, and its
// Down restores the host exactly.
func TestPrivHostSettingHeldByOneLab(t *testing.T) {
	a, before, want := vethRmemMax(t)
	if !rmemMaxHostWide(t) {
		t.Skip("rmem_max is per-namespace on this kernel: no host-wide setting to share")
	}
	la := upLab(t, a)
	other, _ := strconv.Atoi(want)
	b := presetWith(t, "veth", map[string]string{"rmem_max": strconv.Itoa(other * 2)})
	id := pinID(t)
	lb, err := Up(context.Background(), b, UpOptions{})
	if err == nil {
		downOnCleanup(t, lb)
		t.Fatal("a second lab took the host-wide rmem_max another lab holds")
	}
	if !errors.Is(err, tune.ErrHeld) || !strings.Contains(err.Error(), la.ID) {
		t.Errorf("want tune.ErrHeld naming lab %s, got %v", la.ID, err)
	}
	assertClean(t, id)
	if now := strings.TrimSpace(rawSysctl(t, "net/core/rmem_max")); now != want {
		t.Errorf("rmem_max %s while the first lab is up, want %s", now, want)
	}
	if err := la.Down(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := rawSysctl(t, "net/core/rmem_max"); after != before {
		t.Errorf("host rmem_max %q after down, want %q", after, before)
	}
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }
