package tune

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cnibench/cnibench/pkg/netns"
	"golang.org/x/sys/unix"
)

// ErrRolledBack is returned when a journal was already rolled back.
var ErrRolledBack = errors.New("already rolled back")

// Rollback restores every change of the journal at path that is still held
// (not undone, not rolled back before), newest first, using the values
// exactly as they were read. Changes inside a namespace, or of an
// interface, that no longer exists count as restored: the namespace took
// its values with it. Entries whose write never happened (a crash between
// the journal line and the write) restore the old value, which is harmless.
// It keeps going past failures and returns them joined; only a complete
// rollback is marked in the journal.
func Rollback(e *Env, path string) (restored int, err error) {
	unlock, err := lockDir(filepath.Dir(path))
	if err != nil {
		return 0, err
	}
	defer unlock()
	return rollback(e, path)
}

func rollback(e *Env, path string) (restored int, err error) {
	entries, err := ReadJournal(path)
	if errors.Is(err, ErrEmptyJournal) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	held, rolledBack := heldChanges(entries)
	if len(held) == 0 && rolledBack {
		return 0, fmt.Errorf("journal %s: %w", path, ErrRolledBack)
	}
	var errs []error
	for i := len(held) - 1; i >= 0; i-- {
		en := held[i]
		werr := restore(e, en)
		if werr != nil && !errors.Is(werr, errGone) {
			errs = append(errs, fmt.Errorf("restore %s%s: %w", en.Knob, where(en), werr))
			continue
		}
		restored++
	}
	j, oerr := openJournalAppend(path)
	if oerr != nil {
		return restored, errors.Join(append(errs, oerr)...)
	}
	defer j.close()
	mark := Entry{Type: "rollback", OK: len(errs) == 0}
	if len(errs) > 0 {
		mark.Error = errors.Join(errs...).Error()
	}
	if aerr := j.append(mark); aerr != nil {
		errs = append(errs, aerr)
	}
	return restored, errors.Join(errs...)
}

// RollbackAll rolls back every journal in dir that is not rolled back yet,
// newest first, so stacked applies unwind in order.
func RollbackAll(e *Env, dir string) (journals, restored int, err error) {
	if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
		return 0, 0, nil
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return 0, 0, err
	}
	defer unlock()
	js, err := Journals(dir)
	if err != nil {
		return 0, 0, err
	}
	var errs []error
	for i := len(js) - 1; i >= 0; i-- {
		if js[i].RolledBack {
			continue
		}
		if js[i].Error != "" {
			errs = append(errs, errors.New(js[i].Error))
			continue
		}
		n, rerr := rollback(e, js[i].Path)
		restored += n
		journals++
		if rerr != nil {
			errs = append(errs, rerr)
		}
	}
	return journals, restored, errors.Join(errs...)
}

// Undo restores, newest first, the changes made after mark (a Seq), and
// records that they are undone so Rollback leaves them alone. The lab uses
// it for a host setting it needs only while it builds (OVS's socket
// defaults). A change that cannot be restored stays held, for Rollback.
func (j *Journal) Undo(mark int) error {
	return j.locked(func() error {
		var errs []error
		for s := j.seq; s > mark; s-- {
			en, ok := j.changes[s]
			if !ok {
				continue
			}
			rerr := restore(j.env, en)
			if errors.Is(rerr, errGone) {
				rerr = nil
			}
			mark := Entry{Type: "undo", Seq: s, OK: rerr == nil}
			if rerr != nil {
				mark.Error = rerr.Error()
				errs = append(errs, fmt.Errorf("undo %s%s: %w", en.Knob, where(en), rerr))
			} else {
				delete(j.changes, s)
			}
			if aerr := j.j.append(mark); aerr != nil {
				errs = append(errs, aerr)
			}
		}
		return errors.Join(errs...)
	})
}

// errGone says the setting's owner (a namespace, an interface) no longer
// exists: its values went with it, nothing is left to restore.
var errGone = errors.New("gone")

// restore writes back en.Old for a change entry of any kind.
func restore(e *Env, en Entry) error {
	if en.Netns != "" {
		if !netnsExists(en.Netns) {
			// The namespace is gone (a lab torn down), and its values
			// with it: nothing is left to restore, as in CNI's DEL.
			return errGone
		}
		e = e.WithNetns(en.Netns)
	}
	switch en.Knob {
	case KindSysctl:
		rel, err := sysctlRel(en.Target)
		if err != nil {
			return err
		}
		return e.do(func() error { return writeFile(e.proc(rel), en.Old) })
	case KindSysfs:
		if filepath.Clean(en.Target) != en.Target || strings.HasPrefix(en.Target, "..") || filepath.IsAbs(en.Target) {
			return fmt.Errorf("sysfs path %q in the journal", en.Target)
		}
		return writeFile(e.sys(en.Target), en.Old)
	case KindOffloads:
		old, err := parseFeatures(en.Old)
		if err != nil {
			return err
		}
		return e.do(func() error {
			have, err := e.nic().Features(en.Target)
			if errors.Is(err, unix.ENODEV) {
				return errGone // the interface was deleted with its settings
			}
			if err != nil {
				return nicErr(en.Target, "read offloads", err)
			}
			back := map[string]bool{}
			for f, on := range old {
				if st, ok := have[f]; ok && !st.Fixed && st.Active != on {
					back[f] = on
				}
			}
			if len(back) == 0 {
				return nil
			}
			return setFeatures(e.nic(), en.Target, back)
		})
	}
	k, err := Lookup(en.Knob)
	if err != nil {
		return err
	}
	return writeKnob(e, k, en.Target, en.Old, en.OldAbsent)
}

// netnsExists is a variable so tests can simulate a vanished namespace.
var netnsExists = netns.Exists

func where(en Entry) string {
	var parts []string
	if en.Target != "" {
		parts = append(parts, en.Target)
	}
	if en.Netns != "" {
		parts = append(parts, "netns "+en.Netns)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
