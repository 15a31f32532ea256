package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/tune"
)

// Every setting a lab changes — a sysctl on the host or in one of its
// namespaces, an interface's offloads — goes through one pkg/tune Journal
// per lab: the old value is journaled (fsynced) before the change, the
// journal's path is in the lab's state file before its first change, and
// Down, Clean and every failed Up roll it back with tune.Rollback. Objects
// the lab creates (namespaces, links, tables, bridges) are not settings:
// the state file lists them and teardown deletes them.

// journalDir holds the labs' journals, beside their state files (so
// $CNIBENCH_STATE_DIR moves both); files are named <time>-<lab id>.jsonl.
func journalDir() string { return filepath.Join(StateDir, "journal") }

// journal returns the lab's journal, creating it at the first change: the
// file with its begin entry first, then its path in the state file, then
// the change — so `lab clean` after a SIGKILL at any point finds every
// change made.
func (b *builder) journal() (*tune.Journal, error) {
	b.jmu.Lock()
	defer b.jmu.Unlock()
	if b.jr != nil {
		return b.jr, nil
	}
	j, err := tune.NewJournal(tune.JournalOptions{Dir: journalDir(), ID: b.l.ID, Scope: "lab:" + b.l.Name})
	if err != nil {
		return nil, fmt.Errorf("lab journal: %w", err)
	}
	b.l.Journal = j.Path()
	if err := b.l.save(); err != nil {
		j.Close()
		return nil, err
	}
	b.jr = j
	return j, nil
}

// sysctl sets a sysctl (dotted name) inside namespace ns, or on the host
// when ns is "", journaled.
func (b *builder) sysctl(ns, name, value string) error {
	j, err := b.journal()
	if err != nil {
		return err
	}
	return j.SetSysctl(ns, name, value)
}

// offloads is `ethtool -K` on an interface inside ns ("" = the host's
// namespace), journaled; it returns the names the driver fixes.
func (b *builder) offloads(ns, ifname string, set map[string]bool) ([]string, error) {
	j, err := b.journal()
	if err != nil {
		return nil, err
	}
	return j.SetOffloads(ns, ifname, set)
}

// rollbackJournal undoes every change still held in the lab's journal. A
// journal that is gone was rolled back and removed by an earlier Down.
func (l *Lab) rollbackJournal() error {
	if l.Journal == "" {
		return nil
	}
	_, err := tune.Rollback(tune.DefaultEnv(), l.Journal)
	if err == nil || errors.Is(err, tune.ErrRolledBack) || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("roll back %s: %w", l.Journal, err)
}

// Changes returns the changes the lab holds now (its journal's entries not
// yet undone or rolled back), oldest first.
func (l *Lab) Changes() ([]tune.Entry, error) {
	if l.Journal == "" {
		return nil, nil
	}
	held, err := tune.HeldChanges(l.Journal)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return held, err
}

// ChangesHost reports whether the lab holds a host-wide setting (a sysctl
// such as net.core.rmem_max on a kernel where it is not per-namespace). An
// unreadable journal counts as yes: callers use it to keep such labs apart.
func (l *Lab) ChangesHost() bool {
	if t, err := lookupTopology(l.Preset); err != nil || t.changesHost == yes {
		// The topology affects the whole host while it is up (its row says
		// why), or this binary does not know it: keep it apart too.
		return true
	}
	if l.Spec != nil && l.Spec.DPDK != nil {
		// A DPDK switch (an OVN lab's with dpdk=on): a PMD that does not
		// sleep spins a whole CPU, which every other lab would feel.
		return true
	}
	held, err := l.Changes()
	if err != nil {
		return true
	}
	for _, c := range held {
		if c.KnobScope == tune.ScopeHost {
			return true
		}
	}
	return false
}

// nsSysctlWritable reports whether the sysctl name can be written inside ns.
// On kernels where a sysctl is not per-namespace, /proc/sys shows it
// read-only there.
func nsSysctlWritable(ns, name string) (bool, error) {
	var ok bool
	err := netns.Do(ns, func() error {
		f, err := os.OpenFile(filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/")), os.O_WRONLY, 0)
		if err != nil {
			if errors.Is(err, os.ErrPermission) {
				return nil
			}
			return err
		}
		f.Close()
		ok = true
		return nil
	})
	return ok, err
}

// JournalStatus is one lab journal for `tune status`: whose it is and what
// it holds.
type JournalStatus struct {
	tune.JournalInfo
	// Lab and State name the lab whose state file points to the journal;
	// Lab is empty for a journal no lab records any more (a `lab up`
	// killed before its state write, a failed Down): `lab clean --id`
	// rolls it back.
	Lab   string       `json:"lab,omitempty"`
	State string       `json:"state,omitempty"`
	Held  []tune.Entry `json:"held"`
}

// Journals lists the labs' journals that belong to a lab or still hold a
// change, oldest first.
func Journals() ([]JournalStatus, error) {
	infos, err := tune.Journals(journalDir())
	if err != nil {
		return nil, err
	}
	labs, lerr := List()
	byPath := map[string]*Lab{}
	for _, l := range labs {
		if l.Journal != "" {
			byPath[l.Journal] = l
		}
	}
	var out []JournalStatus
	for _, info := range infos {
		st := JournalStatus{JournalInfo: info, Held: []tune.Entry{}}
		if l, ok := byPath[info.Path]; ok {
			st.Lab, st.State = l.Name, l.State()
		}
		if info.Error == "" {
			held, err := tune.HeldChanges(info.Path)
			if err != nil {
				st.Error = err.Error()
			}
			if held != nil {
				st.Held = held
			}
		}
		if st.Lab == "" && len(st.Held) == 0 && st.Error == "" {
			continue // rolled back, its lab gone
		}
		out = append(out, st)
	}
	return out, lerr
}
