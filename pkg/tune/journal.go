package tune

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
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

// Change is one planned or applied write.
type Change struct {
	Knob   string `json:"knob"`
	Netns  string `json:"netns,omitempty"`
	Target string `json:"target,omitempty"`
	Old    string `json:"old"`
	New    string `json:"new"`
	Error  string `json:"error,omitempty"`
}

// Skip is a knob apply did not change, and why.
type Skip struct {
	Knob   string `json:"knob"`
	Netns  string `json:"netns,omitempty"`
	Target string `json:"target,omitempty"`
	Reason string `json:"reason"`
}

// ApplyOptions says what to apply where.
type ApplyOptions struct {
	Env     *Env
	Profile Profile
	Knobs   []*Knob
	// Netns, when not empty, restricts apply to per-namespace knobs inside
	// these namespaces (lab scope). Empty means the host.
	Netns []string
	// ScopeLabel is recorded in the journal (host, lab:<name>, netns:<name>).
	ScopeLabel string
	DryRun     bool
	JournalDir string
}

// ApplyReport is what apply did.
type ApplyReport struct {
	Journal string   `json:"journal,omitempty"`
	Changes []Change `json:"changes"`
	Skipped []Skip   `json:"skipped"`
}

// Failed counts changes that did not take.
func (r *ApplyReport) Failed() int {
	n := 0
	for _, c := range r.Changes {
		if c.Error != "" {
			n++
		}
	}
	return n
}

// afterWrite is called after every host write of apply; tests use it to
// kill the process between two writes.
var afterWrite func(n int)

type plannedChange struct {
	knob *Knob
	env  *Env
	f    Finding
}

// plan audits the selected knobs and returns what apply would write.
func plan(o ApplyOptions) ([]plannedChange, []Skip) {
	var envs []*Env
	if len(o.Netns) == 0 {
		envs = []*Env{o.Env}
	} else {
		for _, n := range o.Netns {
			envs = append(envs, o.Env.WithNetns(n))
		}
	}
	var plan []plannedChange
	var skips []Skip
	for _, e := range envs {
		var ks []*Knob
		for _, k := range o.Knobs {
			if len(o.Netns) > 0 && k.Scope != ScopeNetns {
				continue // lab scope touches namespaces only, never the host
			}
			ks = append(ks, k)
		}
		for _, f := range Audit(e, ks, []Profile{o.Profile}) {
			sk := Skip{Knob: f.Knob, Netns: f.Netns, Target: f.Target}
			switch {
			case f.Status == StatusOK, f.Status == StatusNoRec:
				continue
			case f.Status == StatusCannotRead:
				sk.Reason = "cannot read: " + f.Why
			case f.AuditOnly || f.knob.Write == nil:
				sk.Reason = "audit only: " + f.knob.Why
			case f.want == "":
				sk.Reason = "differs but nothing to write: " + f.Why
			default:
				plan = append(plan, plannedChange{knob: f.knob, env: e, f: f})
				continue
			}
			skips = append(skips, sk)
		}
	}
	return plan, skips
}

// Apply writes the journal first, then changes the host knob by knob. A knob
// that fails is recorded and the rest continue; the returned error is only
// for failures that leave nothing safe to do (the journal cannot be written).
func Apply(o ApplyOptions) (*ApplyReport, error) {
	if o.JournalDir == "" {
		o.JournalDir = DefaultJournalDir
	}
	todo, skips := plan(o)
	rep := &ApplyReport{Skipped: skips, Changes: []Change{}}
	if rep.Skipped == nil {
		rep.Skipped = []Skip{}
	}
	for _, p := range todo {
		rep.Changes = append(rep.Changes, Change{Knob: p.knob.ID, Netns: p.env.Netns, Target: p.f.Target,
			Old: p.f.Current, New: p.f.want})
	}
	if o.DryRun || len(todo) == 0 {
		return rep, nil
	}
	unlock, err := lockDir(o.JournalDir)
	if err != nil {
		return rep, err
	}
	defer unlock()
	id := runid.New()
	j, err := createJournal(o.JournalDir, id)
	if err != nil {
		return rep, err
	}
	defer j.close()
	rep.Journal = j.path
	host, _ := os.Hostname()
	if err := j.append(Entry{Type: "begin", ID: id, Profile: o.Profile, Scope: o.ScopeLabel, Host: host}); err != nil {
		return rep, err
	}
	for i, p := range todo {
		e := Entry{Type: "change", Seq: i + 1, Knob: p.knob.ID, KnobScope: p.knob.Scope, Netns: p.env.Netns,
			Target: p.f.Target, Old: p.f.cur.Raw, OldAbsent: p.f.cur.Absent, New: p.f.want}
		if err := j.append(e); err != nil {
			// Without a durable record the change must not happen.
			for k := i; k < len(todo); k++ {
				rep.Changes[k].Error = "not applied: " + err.Error()
			}
			return rep, err
		}
		werr := writeKnob(p.env, p.knob, p.f.Target, p.f.want, false)
		res := Entry{Type: "result", Seq: i + 1, OK: werr == nil}
		if werr != nil {
			res.Error = werr.Error()
			rep.Changes[i].Error = werr.Error()
		}
		if afterWrite != nil {
			afterWrite(i + 1)
		}
		if err := j.append(res); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func writeKnob(e *Env, k *Knob, target, value string, absent bool) error {
	if k.Write == nil {
		return fmt.Errorf("knob %s cannot be written", k.ID)
	}
	if k.Scope == ScopeNetns {
		return e.do(func() error { return k.Write(e, target, value, absent) })
	}
	return k.Write(e, target, value, absent)
}

// netnsExists is a variable so tests can simulate a vanished namespace.
var netnsExists = netns.Exists

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

// JournalInfo summarises one journal for `tune status`.
type JournalInfo struct {
	Path       string    `json:"path"`
	ID         string    `json:"id"`
	Started    time.Time `json:"started"`
	Profile    Profile   `json:"profile"`
	Scope      string    `json:"scope"`
	Changes    int       `json:"changes"`
	Failed     int       `json:"failed"`
	Unfinished int       `json:"unfinished"` // change lines without a result: crash mid-apply
	// Held counts the changes still in effect: not undone, not rolled back.
	Held       int    `json:"held"`
	RolledBack bool   `json:"rolled_back"`
	Error      string `json:"error,omitempty"`
}

// Journals lists the journals in dir, oldest first.
func Journals(dir string) ([]JournalInfo, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) { // none there: an empty list
		return nil, err
	}
	var out []JournalInfo
	for _, d := range ents {
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".jsonl") {
			continue
		}
		p := filepath.Join(dir, d.Name())
		info := JournalInfo{Path: p}
		es, err := ReadJournal(p)
		if errors.Is(err, ErrEmptyJournal) {
			continue // nothing was changed under it
		}
		if err != nil {
			info.Error = err.Error()
			out = append(out, info)
			continue
		}
		info.ID, info.Started, info.Profile, info.Scope = es[0].ID, es[0].Time, es[0].Profile, es[0].Scope
		results := map[int]bool{}
		held, rb := heldChanges(es)
		info.Held = len(held)
		for _, en := range es {
			switch en.Type {
			case "change":
				info.Changes++
			case "result":
				results[en.Seq] = true
				if !en.OK {
					info.Failed++
				}
			}
		}
		// Rolled back: a complete rollback is recorded and no change was
		// made after it.
		info.RolledBack = rb && info.Held == 0
		for _, en := range es {
			if en.Type == "change" && !results[en.Seq] {
				info.Unfinished++
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
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
