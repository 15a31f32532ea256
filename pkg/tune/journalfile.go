package tune

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultJournalDir is where apply keeps its journals.
const DefaultJournalDir = "/var/lib/cnibench/journal"

// Entry is one line of a journal (JSON lines). A journal starts with one
// "begin" entry; each change is a "change" entry written and fsynced BEFORE
// the host is touched, followed by a "result" entry; an "undo" entry marks
// one change restored early by its owner (Journal.Undo); a rollback appends
// a "rollback" entry, ok when complete, which covers every change above it.
type Entry struct {
	Type string    `json:"type"` // begin | change | result | undo | rollback
	Time time.Time `json:"time"`
	Seq  int       `json:"seq,omitempty"`

	// begin
	ID      string  `json:"id,omitempty"`
	Profile Profile `json:"profile,omitempty"`
	Scope   string  `json:"scope,omitempty"` // host | lab:<name> | netns:<name>
	Host    string  `json:"host,omitempty"`

	// change (knob: a registry knob id, or KindSysctl, KindSysfs, KindOffloads)
	Knob      string `json:"knob,omitempty"`
	KnobScope Scope  `json:"knob_scope,omitempty"`
	Netns     string `json:"netns,omitempty"`
	Target    string `json:"target,omitempty"`
	Old       string `json:"old,omitempty"`
	OldAbsent bool   `json:"old_absent,omitempty"`
	New       string `json:"new,omitempty"`

	// result, rollback
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`
}

// lockDir takes an exclusive advisory lock on dir/.lock, so two applies or
// rollbacks on one journal directory never interleave their reads and writes.
func lockDir(dir string) (unlock func(), err error) {
	f, err := openLock(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal lock: %w", err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// openLock opens (creating) dir/.lock, the file lockDir flocks.
func openLock(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create journal dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal lock: %w", err)
	}
	return f, nil
}

// journal is an open journal file; every append is fsynced.
type journal struct {
	f    *os.File
	path string
}

func createJournal(dir, id string) (*journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create journal dir: %w", err)
	}
	name := time.Now().UTC().Format("20060102T150405.000000000Z") + "-" + id + ".jsonl"
	p := filepath.Join(dir, name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create journal: %w", err)
	}
	// The directory entry must be durable too, or a crash could lose the
	// file while the host keeps the changes.
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return &journal{f: f, path: p}, nil
}

func openJournalAppend(p string) (*journal, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	return &journal{f: f, path: p}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync journal dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync journal dir: %w", err)
	}
	return nil
}

func (j *journal) append(e Entry) error { return j.write(e, true) }

// appendUnsynced is for lines rollback does not depend on (a result): a
// killed process loses nothing the kernel has accepted, and a lost result
// only shows the change as unfinished.
func (j *journal) appendUnsynced(e Entry) error { return j.write(e, false) }

func (j *journal) write(e Entry, sync bool) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write journal %s: %w", j.path, err)
	}
	if !sync {
		return nil
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("sync journal %s: %w", j.path, err)
	}
	return nil
}

func (j *journal) close() error { return j.f.Close() }

// ErrEmptyJournal is returned for a journal without one whole entry: its
// writer was killed while creating it, before any change (a change is
// made only after its entry is fsynced, and the begin entry comes first).
// Rollback treats it as nothing to undo.
var ErrEmptyJournal = errors.New("no entry: stopped before its first change, nothing to roll back")

// ReadJournal parses a journal. A torn last line (crash during a write) is
// ignored: its change never reached the host, because the host is changed
// only after the line is fsynced.
func ReadJournal(p string) ([]Entry, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	line := 0
	var pending error
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue // a blank line (an editor's) holds no entry
		}
		if pending != nil {
			return nil, pending // a bad line that is not the last one
		}
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			pending = fmt.Errorf("journal %s line %d: %w", p, line, err)
			continue
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read journal %s: %w", p, err)
	}
	if len(out) == 0 {
		// Empty, or only a torn first line: the process stopped before its
		// begin entry reached the disk, so it changed nothing.
		return nil, fmt.Errorf("journal %s: %w", p, ErrEmptyJournal)
	}
	if out[0].Type != "begin" {
		return nil, fmt.Errorf("journal %s: does not start with a begin entry", p)
	}
	return out, nil
}
