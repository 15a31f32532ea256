package tune

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/fixture"
	"golang.org/x/sys/unix"
)

// fixtureProc is a /proc with the sysctls the lab changes, each with the
// trailing newline the kernel prints.
func fixtureProc(t *testing.T) (*Env, string) {
	t.Helper()
	root := fixture.Tree(t, map[string]string{
		"proc/sys/net/core/rmem_max":                            "212992\n",
		"proc/sys/net/core/wmem_max":                            "212992\n",
		"proc/sys/net/core/rmem_default":                        "212992\n",
		"proc/sys/net/ipv4/tcp_rmem":                            "4096\t131072\t6291456\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages": "0\n",
	})
	return &Env{ProcRoot: filepath.Join(root, "proc"), SysRoot: filepath.Join(root, "sys"), DevRoot: filepath.Join(root, "dev")}, root
}

func readFixture(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantFixture fails the test unless the fixture file rel holds exactly want.
func wantFixture(t *testing.T, root, rel, want string) {
	t.Helper()
	if got := readFixture(t, root, rel); got != want {
		t.Errorf("%s = %q, want %q", rel, got, want)
	}
}

// openJournal opens a journal that is closed when the test ends.
func openJournal(t *testing.T, o JournalOptions) *Journal {
	t.Helper()
	j, err := NewJournal(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// setSysctl changes a host sysctl through j and stops the test if it fails.
func setSysctl(t *testing.T, j *Journal, name, value string) {
	t.Helper()
	if err := j.SetSysctl("", name, value); err != nil {
		t.Fatal(err)
	}
}

// wantRollback rolls back the journal at path and stops the test unless it
// restored exactly n changes.
func wantRollback(t *testing.T, e *Env, path string, n int) {
	t.Helper()
	if got, err := Rollback(e, path); err != nil || got != n {
		t.Fatalf("rollback %s: %d changes restored, want %d (%v)", filepath.Base(path), got, n, err)
	}
}

// A host sysctl and a sysfs value changed through a Journal: the old text is
// journaled exactly as read, an equal value is not journaled, and Rollback
// writes back the same bytes.
func TestJournalSysctlSysfsRollbackExact(t *testing.T) {
	e, root := fixtureProc(t)
	dir := t.TempDir()
	j := openJournal(t, JournalOptions{Dir: dir, ID: "ab12", Scope: "lab:x", Env: e})
	if !strings.HasSuffix(j.Path(), "-ab12.jsonl") {
		t.Errorf("journal %s is not named for its id", j.Path())
	}
	setSysctl(t, j, "net.core.rmem_max", "16777216")
	setSysctl(t, j, "net.ipv4.tcp_rmem", "4096 131072 6291456") // equal but for whitespace: nothing to change
	if err := j.SetSysfs("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "64"); err != nil {
		t.Fatal(err)
	}
	wantFixture(t, root, "proc/sys/net/core/rmem_max", "16777216")
	es, err := ReadJournal(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	var changes []Entry
	for _, en := range es {
		if en.Type == "change" {
			changes = append(changes, en)
		}
	}
	if es[0].ID != "ab12" || es[0].Scope != "lab:x" || len(changes) != 2 {
		t.Fatalf("journal: %+v", es)
	}
	if c := changes[0]; c.Knob != KindSysctl || c.Target != "net.core.rmem_max" || c.Old != "212992\n" || c.New != "16777216" || c.KnobScope != ScopeHost {
		t.Errorf("sysctl change: %+v", c)
	}
	if c := changes[1]; c.Knob != KindSysfs || c.Old != "0\n" || c.KnobScope != ScopeHost {
		t.Errorf("sysfs change: %+v", c)
	}
	js, _ := Journals(dir)
	if len(js) != 1 || js[0].Held != 2 || js[0].RolledBack || js[0].Unfinished != 0 {
		t.Errorf("journals: %+v", js)
	}
	j.Close()
	wantRollback(t, e, j.Path(), 2)
	wantFixture(t, root, "proc/sys/net/core/rmem_max", "212992\n") // the bytes read
	wantFixture(t, root, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "0\n")
	if _, err := Rollback(e, j.Path()); !errors.Is(err, ErrRolledBack) {
		t.Errorf("second rollback: %v", err)
	}
	if err := j.SetSysctl("", "net.core.rmem_max", "1"); !errors.Is(err, ErrClosed) {
		t.Errorf("change after Close: %v", err)
	}
}

// Undo puts back what was changed after a mark and records it, so that
// Rollback restores only the rest.
func TestJournalUndo(t *testing.T) {
	e, root := fixtureProc(t)
	j := openJournal(t, JournalOptions{Dir: t.TempDir(), Env: e})
	setSysctl(t, j, "net.core.rmem_max", "4194304")
	mark := j.Seq()
	for _, k := range []string{"net.core.rmem_default", "net.core.wmem_max"} {
		setSysctl(t, j, k, "33554432")
	}
	if err := j.Undo(mark); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"rmem_default", "wmem_max"} {
		wantFixture(t, root, "proc/sys/net/core/"+f, "212992\n")
	}
	held, err := HeldChanges(j.Path())
	if err != nil || len(held) != 1 || held[0].Target != "net.core.rmem_max" {
		t.Fatalf("held after undo: %+v %v", held, err)
	}
	// Someone changes rmem_default again; rollback must not touch it.
	if err := os.WriteFile(filepath.Join(root, "proc/sys/net/core/rmem_default"), []byte("425984"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantRollback(t, e, j.Path(), 1)
	wantFixture(t, root, "proc/sys/net/core/rmem_max", "212992\n")
	wantFixture(t, root, "proc/sys/net/core/rmem_default", "425984") // not an undone change rewritten
}

// A change made after a rollback (an owner still at work when `lab clean`
// ran) is held again, and the next rollback restores it.
func TestJournalChangeAfterRollback(t *testing.T) {
	e, root := fixtureProc(t)
	j := openJournal(t, JournalOptions{Dir: t.TempDir(), Env: e})
	setSysctl(t, j, "net.core.rmem_max", "4194304")
	wantRollback(t, e, j.Path(), 1)
	setSysctl(t, j, "net.core.wmem_max", "4194304")
	held, _ := HeldChanges(j.Path())
	if len(held) != 1 || held[0].Target != "net.core.wmem_max" {
		t.Fatalf("held: %+v", held)
	}
	wantRollback(t, e, j.Path(), 1)
	wantFixture(t, root, "proc/sys/net/core/wmem_max", "212992\n")
}

// Two journals of one directory cannot hold one host-wide setting: the
// second owner is refused (ErrHeld) before anything is written, until the
// first is rolled back.
func TestJournalHostSettingHeldOnce(t *testing.T) {
	e, root := fixtureProc(t)
	dir := t.TempDir()
	a := openJournal(t, JournalOptions{Dir: dir, ID: "aaaa", Scope: "lab:a", Env: e})
	b := openJournal(t, JournalOptions{Dir: dir, ID: "bbbb", Scope: "lab:b", Env: e})
	setSysctl(t, a, "net.core.rmem_max", "4194304")
	err := b.SetSysctl("", "net.core.rmem_max", "8388608")
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "lab:a") {
		t.Fatalf("second owner: %v", err)
	}
	wantFixture(t, root, "proc/sys/net/core/rmem_max", "4194304") // the refused change not written
	if err := b.SetSysctl("", "net.core.wmem_max", "8388608"); err != nil {
		t.Errorf("another setting: %v", err)
	}
	wantRollback(t, e, a.Path(), 1)
	if err := b.SetSysctl("", "net.core.rmem_max", "8388608"); err != nil {
		t.Errorf("after the first owner's rollback: %v", err)
	}
}

// A process killed after its change entry reached the disk but before the
// write: rollback writes the old value back, which is what the file holds.
func TestJournalKilledBeforeWrite(t *testing.T) {
	e, root := fixtureProc(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "20260101T000000.000000000Z-ab12.jsonl")
	body := `{"type":"begin","id":"ab12","scope":"lab:x"}` + "\n" +
		`{"type":"change","seq":1,"knob":"sysctl","knob_scope":"host","target":"net.core.rmem_max","old":"212992\n","new":"16777216"}` + "\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	js, _ := Journals(dir)
	if len(js) != 1 || js[0].Unfinished != 1 || js[0].Held != 1 {
		t.Fatalf("journals: %+v", js)
	}
	wantRollback(t, e, p, 1)
	wantFixture(t, root, "proc/sys/net/core/rmem_max", "212992\n")
}

// journalCheckNIC fails the test if a feature is set before the journal on
// disk holds the change that sets it.
type journalCheckNIC struct {
	*fakeNIC
	t    *testing.T
	path func() string
}

func (n journalCheckNIC) SetFeature(ifname, f string, on bool) error {
	b, err := os.ReadFile(n.path())
	if err != nil || !strings.Contains(string(b), `"type":"change"`) || !strings.Contains(string(b), `"target":"`+ifname+`"`) {
		n.t.Errorf("feature %s of %s set before its journal entry was written: %q %v", f, ifname, b, err)
	}
	return n.fakeNIC.SetFeature(ifname, f, on)
}

// Offloads on a fixture NIC: the journal is on disk before the ioctl, the
// old state of every changeable feature is journaled, groups the driver
// fixes are reported, and a deleted interface counts as restored.
func TestJournalOffloadsFixture(t *testing.T) {
	nic := &fakeNIC{features: map[string]map[string]Feature{
		"veth0": {"rx-gro": {Active: true}, "tx-generic-segmentation": {Active: true},
			"tx-tcp-segmentation": {Active: true, Fixed: true}, "rx-lro": {Active: false}},
	}}
	var j *Journal
	e := &Env{NIC: journalCheckNIC{fakeNIC: nic, t: t, path: func() string { return j.Path() }}}
	j = openJournal(t, JournalOptions{Dir: t.TempDir(), Env: e})
	fixed, err := j.SetOffloads("", "veth0", map[string]bool{"gro": false, "gso": false, "tso": false})
	if err != nil || strings.Join(fixed, ",") != "tso" {
		t.Fatalf("SetOffloads: fixed %v, %v", fixed, err)
	}
	if nic.features["veth0"]["rx-gro"].Active || nic.features["veth0"]["tx-generic-segmentation"].Active {
		t.Errorf("features not changed: %+v", nic.features["veth0"])
	}
	held, _ := HeldChanges(j.Path())
	if len(held) != 1 || held[0].Old != "rx-gro=on rx-lro=off tx-generic-segmentation=on" || held[0].New != "rx-gro=off tx-generic-segmentation=off" {
		t.Fatalf("journaled: %+v", held)
	}
	wantRollback(t, e, j.Path(), 1)
	if !nic.features["veth0"]["rx-gro"].Active || !nic.features["veth0"]["tx-generic-segmentation"].Active {
		t.Errorf("features not restored: %+v", nic.features["veth0"])
	}
	// The interface goes (a lab's veth deleted at teardown): nothing left to restore.
	if _, err := j.SetOffloads("", "veth0", map[string]bool{"gro": false}); err != nil {
		t.Fatal(err)
	}
	delete(nic.features, "veth0")
	nic.featErr = unix.ENODEV
	wantRollback(t, e, j.Path(), 1) // with the interface gone
}

// A journal directory that was never created holds no journals; one that
// cannot be read is an error, not an empty list.
func TestJournalsDirMissingOrUnreadable(t *testing.T) {
	dir := t.TempDir()
	if js, err := Journals(filepath.Join(dir, "never-made")); err != nil || js != nil {
		t.Errorf("missing dir: %v, %v", js, err)
	}
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Journals(file); err == nil {
		t.Error("a file as the journal dir: no error")
	}
}

func TestSysctlNames(t *testing.T) {
	for _, bad := range []string{"", "rmem_max", "net/core/rmem_max", "net.core.../x", "../etc.passwd", "net. core"} {
		if _, err := sysctlRel(bad); err == nil {
			t.Errorf("sysctl name %q accepted", bad)
		}
	}
	if rel, err := sysctlRel("net.ipv4.conf.cnb-ab12-u.forwarding"); err != nil || rel != "sys/net/ipv4/conf/cnb-ab12-u/forwarding" {
		t.Errorf("interface sysctl: %q %v", rel, err)
	}
}
