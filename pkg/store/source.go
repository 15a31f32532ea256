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
// one: a typo in --db must not leave an empty database behind.
func OpenExisting(path string) (*DB, error) {
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

// Load reads the run a reference names and its samples.
func (s *Sources) Load(ref string) (Loaded, error) {
	db, ref, err := s.Resolve(ref)
	if err != nil {
		return Loaded{}, err
	}
	r, ss, err := db.Load(ref)
	return Loaded{DB: db, Run: r, Samples: ss}, err
}

// Resolve opens (once) the database a reference names and returns the
// reference within it.
func (s *Sources) Resolve(ref string) (*DB, string, error) {
	path := s.defaultPath
	if i := strings.LastIndex(ref, ":"); i > 0 {
		if st, err := os.Stat(ref[:i]); err == nil && !st.IsDir() {
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
