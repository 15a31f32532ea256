package tune

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/cnibench/cnibench/pkg/runid"
	"golang.org/x/sys/unix"
)

// A Journal is how anything in cnibench other than a tune profile changes a
// host or namespace setting: the lab's sysctls (ip_forward, socket buffer
// limits, OVS's socket defaults), its offloads, and whatever later labs need
// (hugepages). Each Set* method reads the value as it is, appends a change
// entry holding that exact text and fsyncs it, and only then writes; the
// journal is the same JSON-lines file Apply writes, so Rollback, Journals,
// `tune status` and `tune rollback` read both alike.
//
// Besides registry knobs, a change entry's "knob" field may name one of the
// kinds below; its "target" says which setting of that kind.
const (
	// KindSysctl is a file under /proc/sys; target is the dotted name
	// (net.core.rmem_max), netns the namespace ("" = the host's).
	KindSysctl = "sysctl"
	// KindSysfs is a file under /sys; target is its path below /sys
	// (kernel/mm/hugepages/hugepages-2048kB/nr_hugepages). Host scope.
	KindSysfs = "sysfs"
	// KindOffloads is one interface's ethtool features; target is the
	// interface, old every changeable feature as "name=on|off" before the
	// change (so dependent features come back too), new the features asked.
	KindOffloads = "offloads"
)

// ErrHeld is returned when a host-wide setting is already changed by another
// journal in the same directory that is not rolled back (another lab that is
// up, or one a killed process left): two owners of one host-wide value
// cannot both undo it exactly, so the second is refused.
var ErrHeld = errors.New("held by another journal")

// ErrClosed is returned by a Journal's methods after Close.
var ErrClosed = errors.New("journal closed")

// JournalOptions says where a Journal is written and whose it is.
type JournalOptions struct {
	Dir string // default DefaultJournalDir
	// ID is the owner's run id (a lab's), written in the begin entry and
	// the file name; default a new one.
	ID string
	// Scope names the owner in `tune status`: "lab:<name>", "host", …
	Scope string
	// Env is where values are read and written; default DefaultEnv().
	Env *Env
}

// Journal is an open journal for changes made one by one. It is safe for
// concurrent use; changes are serialised.
type Journal struct {
	env  *Env
	dir  string
	id   string
	path string

	mu      sync.Mutex
	j       *journal
	lockf   *os.File // the directory's .lock, flocked around each change
	seq     int
	changes map[int]Entry // change entries by seq, for Undo
}

// NewJournal creates a journal file with its begin entry, durably, before
// any change is made.
func NewJournal(o JournalOptions) (*Journal, error) {
	if o.Dir == "" {
		o.Dir = DefaultJournalDir
	}
	if o.ID == "" {
		o.ID = runid.New()
	}
	if o.Env == nil {
		o.Env = DefaultEnv()
	}
	lockf, err := openLock(o.Dir)
	if err != nil {
		return nil, err
	}
	j, err := createJournal(o.Dir, o.ID)
	if err != nil {
		lockf.Close()
		return nil, err
	}
	host, _ := os.Hostname()
	if err := j.append(Entry{Type: "begin", ID: o.ID, Scope: o.Scope, Host: host}); err != nil {
		j.close()
		lockf.Close()
		return nil, err
	}
	return &Journal{env: o.Env, dir: o.Dir, id: o.ID, path: j.path, j: j, lockf: lockf, changes: map[int]Entry{}}, nil
}

// Path is the journal file; record it where the owner keeps its state, and
// pass it to Rollback to undo every change.
func (j *Journal) Path() string { return j.path }

// Seq is the number of changes recorded so far: a mark for Undo.
func (j *Journal) Seq() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seq
}

// Close closes the file; the journal stays on disk for Rollback.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.j == nil {
		return nil
	}
	err := j.j.close()
	j.lockf.Close()
	j.j = nil
	return err
}

// locked runs fn on the open journal holding both its mutex and the
// directory lock (the one Rollback and Apply take).
func (j *Journal) locked(fn func() error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.j == nil {
		return ErrClosed
	}
	if err := unix.Flock(int(j.lockf.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("journal lock: %w", err)
	}
	defer func() { _ = unix.Flock(int(j.lockf.Fd()), unix.LOCK_UN) }()
	return fn()
}

// record journals e (fsynced) and then runs write, under the directory lock
// so that no rollback reads the journal between the two. A host-wide target
// another journal of the directory holds is refused before anything is
// written.
func (j *Journal) record(e Entry, write func() error) error {
	return j.locked(func() error {
		if e.KnobScope == ScopeHost {
			if holder, ok := heldElsewhere(j.dir, j.path, e); ok {
				return fmt.Errorf("%s %s: %w %s (%s): undo that first (`cnibench lab down`, `lab clean --id %s` or `tune rollback --journal %s`)",
					e.Knob, e.Target, ErrHeld, holder.Path, holder.Scope, holder.ID, holder.Path)
			}
		}
		j.seq++
		e.Type, e.Seq = "change", j.seq
		if err := j.j.append(e); err != nil {
			j.seq--
			return err // without a durable record the change must not happen
		}
		j.changes[e.Seq] = e
		werr := write()
		res := Entry{Type: "result", Seq: e.Seq, OK: werr == nil}
		if werr != nil {
			res.Error = werr.Error()
		}
		// The result line is for `tune status`; rollback trusts the change line
		// alone (restoring a value that was never changed is harmless).
		if err := j.j.appendUnsynced(res); err != nil && werr == nil {
			return err
		}
		return werr
	})
}

// heldElsewhere finds another journal in dir that holds a change of the
// same host-wide setting.
func heldElsewhere(dir, self string, e Entry) (JournalInfo, bool) {
	js, _ := Journals(dir)
	for _, info := range js {
		if info.Path == self || info.Held == 0 {
			continue
		}
		held, err := HeldChanges(info.Path)
		if err != nil {
			continue
		}
		for _, h := range held {
			if h.KnobScope == ScopeHost && h.Netns == "" && h.Knob == e.Knob && h.Target == e.Target {
				return info, true
			}
		}
	}
	return JournalInfo{}, false
}

// SetSysctl is `sysctl -w name=value` inside namespace ns ("" = the host's
// namespace, where the change is host scope), journaled. A value already
// equal (whitespace aside) is left alone and not journaled.
func (j *Journal) SetSysctl(ns, name, value string) error {
	rel, err := sysctlRel(name)
	if err != nil {
		return err
	}
	scope := ScopeHost
	if ns != "" {
		scope = ScopeNetns
	}
	e := j.env.WithNetns(ns)
	// /proc/sys/net shows the namespace of the thread that opens the file:
	// read, journal and write on the one switched thread.
	return e.do(func() error {
		raw, err := readFile(e.proc(rel))
		if err != nil {
			return fmt.Errorf("sysctl %s%s: %w", name, inNetns(ns), err)
		}
		if norm(raw) == norm(value) {
			return nil
		}
		err = j.record(Entry{Knob: KindSysctl, KnobScope: scope, Netns: ns, Target: name, Old: raw, New: value},
			func() error { return writeFile(e.proc(rel), value) })
		if err != nil {
			return fmt.Errorf("sysctl %s=%s%s: %w", name, value, inNetns(ns), err)
		}
		return nil
	})
}

// SetSysfs writes value to /sys/<rel> (host scope), journaled; an equal
// value is left alone.
func (j *Journal) SetSysfs(rel, value string) error {
	if rel == "" || filepath.IsAbs(rel) || filepath.Clean(rel) != rel || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("sysfs path %q: want a clean path below /sys", rel)
	}
	p := j.env.sys(rel)
	raw, err := readFile(p)
	if err != nil {
		return fmt.Errorf("sysfs %s: %w", rel, err)
	}
	if norm(raw) == norm(value) {
		return nil
	}
	if err := j.record(Entry{Knob: KindSysfs, KnobScope: ScopeHost, Target: rel, Old: raw, New: value},
		func() error { return writeFile(p, value) }); err != nil {
		return fmt.Errorf("sysfs %s=%s: %w", rel, value, err)
	}
	return nil
}

// SetOffloads is `ethtool -K ifname gro off tso on …` inside namespace ns
// ("" = this one), through the SIOCETHTOOL ioctl — cnibench's one ethtool
// path —, journaled. Like ethtool, a short name (OffloadNames) changes every
// kernel feature of its group that the driver lets change; the short names
// whose features are all fixed by the driver are returned, so the caller
// can say so.
func (j *Journal) SetOffloads(ns, ifname string, set map[string]bool) (fixed []string, err error) {
	for short := range set {
		if _, ok := offloadGroups[short]; !ok {
			return nil, fmt.Errorf("offload %q: unknown (known: %s)", short, strings.Join(OffloadNames(), ", "))
		}
	}
	e := j.env.WithNetns(ns)
	err = e.do(func() error {
		have, err := e.nic().Features(ifname)
		if err != nil {
			return nicErr(ifname, "read offloads", err)
		}
		change := map[string]bool{}
		for short, on := range set {
			n := 0
			for _, f := range offloadGroups[short] {
				if st, ok := have[f]; ok && !st.Fixed {
					n++
					if st.Active != on {
						change[f] = on
					}
				}
			}
			if n == 0 {
				fixed = append(fixed, short)
			}
		}
		sort.Strings(fixed)
		if len(change) == 0 {
			return nil
		}
		old := map[string]bool{}
		for f, st := range have {
			if !st.Fixed {
				old[f] = st.Active
			}
		}
		err = j.record(Entry{Knob: KindOffloads, KnobScope: ScopeNIC, Netns: ns, Target: ifname,
			Old: formatFeatures(old), New: formatFeatures(change)},
			func() error { return setFeatures(e.nic(), ifname, change) })
		if err != nil {
			return nicErr(ifname, "set offloads", err)
		}
		return nil
	})
	return fixed, err
}

func inNetns(ns string) string {
	if ns == "" {
		return ""
	}
	return " in netns " + ns
}
