package store

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrNoDatabase is wrapped by OpenExisting when the file is not there.
var ErrNoDatabase = errors.New("no results database")

// OpenExisting opens a results database for reading. It does not create
// one: a typo in --db must not leave an empty database behind. (A
// PostgreSQL database is there or not as its server says: Open reaches it
// or fails, and an empty one simply holds no runs.)
func OpenExisting(path string) (*DB, error) {
	if IsPostgres(path) {
		return Open(path)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s: run an experiment first (cnibench run), or point --db at one", ErrNoDatabase, path)
	}
	return Open(path)
}

// Load resolves a run reference (id, name or "last") and reads its samples.
// An unknown reference wraps ErrNotFound with what to do about it.
func (d *DB) Load(ref string) (*Run, []Sample, error) {
	r, err := d.GetRun(ref)
	if errors.Is(err, ErrNotFound) {
		if ref == refLast {
			return nil, nil, notFound(fmt.Sprintf("no runs stored in %s yet: run an experiment first (cnibench run)", d.Path()))
		}
		return nil, nil, notFound(fmt.Sprintf("unknown run %q in %s: list stored runs with `cnibench runs`", ref, d.Path()))
	}
	if err != nil {
		return nil, nil, err
	}
	ss, err := d.Samples(r.ID)
	if err != nil {
		return nil, nil, err
	}
	return r, ss, nil
}

// notFound is ErrNotFound with a message that says what to do instead.
type notFound string

func (e notFound) Error() string { return string(e) }
func (e notFound) Unwrap() error { return ErrNotFound }

// Sources resolves run references, each either REF (id, name or "last") in
// the default database, or FILE:REF in another results database — so runs
// taken on different hosts, each with its own database, can be reported
// side by side or compared without merging the files.
type Sources struct {
	defaultPath string
	dbs         map[string]*DB
}

// NewSources reads plain references from the database at defaultPath.
func NewSources(defaultPath string) *Sources {
	return &Sources{defaultPath: defaultPath, dbs: map[string]*DB{}}
}

// Loaded is a run read through Sources, with the database it is in (for
// what else that database holds of it, e.g. its profiles).
type Loaded struct {
	DB      *DB
	Run     *Run
	Samples []Sample
}

// Load reads the run a reference names and its samples; REF@ARM keeps
// that arm only (OnlyArm).
func (s *Sources) Load(ref string) (Loaded, error) {
	ref, arm := SplitArm(ref)
	db, ref, err := s.Resolve(ref)
	if err != nil {
		return Loaded{}, err
	}
	r, ss, err := db.Load(ref)
	l := Loaded{DB: db, Run: r, Samples: ss}
	if err == nil && arm != "" {
		err = l.OnlyArm(arm, "")
	}
	return l, err
}

// PairArms lets two single-arm loads (REF@ARM each) with different arm
// names be compared: both are renamed "A→B", so their cells match.
func PairArms(a, b *Loaded) {
	if len(a.Run.Arms) != 1 || len(b.Run.Arms) != 1 {
		return
	}
	na, nb := a.Run.Arms[0].Name, b.Run.Arms[0].Name
	if na == nb {
		return
	}
	// Cannot fail: each run has exactly that arm.
	_ = a.OnlyArm(na, na+"→"+nb)
	_ = b.OnlyArm(nb, na+"→"+nb)
}

// Resolve opens (once) the database a reference names and returns the
// reference within it: FILE:REF for a SQLite file, URL:REF for a
// PostgreSQL database (the REF after the URL's last ':', which a URL's own
// port never is: a port is followed by the '/' of the database name).
func (s *Sources) Resolve(ref string) (*DB, string, error) {
	path := s.defaultPath
	if i := strings.LastIndex(ref, ":"); i > 0 {
		if IsPostgres(ref) {
			if !strings.Contains(ref[i+1:], "/") {
				path, ref = ref[:i], ref[i+1:]
			}
		} else if st, err := os.Stat(ref[:i]); err == nil && !st.IsDir() {
			path, ref = ref[:i], ref[i+1:]
		}
	}
	db, ok := s.dbs[path]
	if !ok {
		var err error
		if db, err = OpenExisting(path); err != nil {
			return nil, "", err
		}
		s.dbs[path] = db
	}
	return db, ref, nil
}

// Close closes every database opened.
func (s *Sources) Close() {
	for _, db := range s.dbs {
		db.Close()
	}
}

// Rebase makes arm the run's baseline for one rendering (nothing is
// stored), so any two arms of one interleaved run can be tested against
// each other.
func (r *Run) Rebase(arm string) error {
	var names []string
	for _, a := range r.Arms {
		if a.Name == arm {
			r.Baseline = arm
			return nil
		}
		names = append(names, a.Name)
	}
	return fmt.Errorf("--baseline %q: run %s has no such arm (arms: %s)", arm, r.Name, strings.Join(names, ", "))
}

// SplitArm splits REF@ARM into the run reference and the arm; arm is ""
// when ref names no arm. An "@" inside a database path (a '/' or ':'
// after it) is part of the path.
func SplitArm(ref string) (run, arm string) {
	i := strings.LastIndex(ref, "@")
	if i <= 0 || i == len(ref)-1 || strings.ContainsAny(ref[i+1:], "/:") {
		return ref, ""
	}
	return ref[:i], ref[i+1:]
}

// OnlyArm keeps the run's arm and its samples only, named as (the arm's
// own name when as is ""), and makes it the baseline. It is how two arms
// of one interleaved run are compared as if they were two runs: drift
// between runs — another tenant, a rebuilt lab — lands on both alike.
func (l *Loaded) OnlyArm(arm, as string) error {
	if as == "" {
		as = arm
	}
	var names []string
	for _, a := range l.Run.Arms {
		names = append(names, a.Name)
		if a.Name != arm {
			continue
		}
		r := *l.Run
		a.Name = as
		r.Arms, r.Baseline = []Arm{a}, as
		var ss []Sample
		for _, s := range l.Samples {
			if s.Arm == arm {
				s.Arm = as
				ss = append(ss, s)
			}
		}
		l.Run, l.Samples = &r, ss
		return nil
	}
	return fmt.Errorf("%w: run %s has no arm %q (arms: %s)", ErrNoSuchArm, l.Run.Name, arm, strings.Join(names, ", "))
}

// ErrNoSuchArm is a REF@ARM whose run lacks the arm.
var ErrNoSuchArm = errors.New("no such arm")
