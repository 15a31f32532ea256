package stages

import (
	"errors"
	"fmt"

	"github.com/cnibench/cnibench/pkg/store"
)

// ErrNotProfiled is wrapped when a run asked about was measured without
// --profile, or a test has no profile of both arms.
var ErrNotProfiled = errors.New("not profiled")

// notProfiled is ErrNotProfiled with a message that says what to do.
type notProfiled string

func (e notProfiled) Error() string { return string(e) }
func (e notProfiled) Unwrap() error { return ErrNotProfiled }

// ForRun is a stored run's CPU by stage, nil for a run taken without
// --profile.
func ForRun(db *store.DB, run *store.Run, samples []store.Sample) (*Report, error) {
	profs, err := db.Profiles(run.ID)
	if err != nil || len(profs) == 0 {
		return nil, err
	}
	cells, err := Cells(samples, profs)
	if err != nil {
		return nil, err
	}
	return &Report{Cells: cells}, nil
}

// ExplainRun compares arm b against arm a of a stored run, every test (or
// only test when it is not ""). Errors a user can fix wrap ErrNotProfiled
// (an unknown arm included).
func ExplainRun(db *store.DB, run *store.Run, samples []store.Sample, a, b, test string) ([]Explanation, error) {
	st, err := ForRun(db, run, samples)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, notProfiled(fmt.Sprintf("run %s was measured without --profile: run it again with --profile", run.Name))
	}
	es, err := Explain(st.Cells, a, b)
	if err != nil || test == "" {
		return es, err
	}
	var keep []Explanation
	for _, e := range es {
		if e.Test == test {
			keep = append(keep, e)
		}
	}
	if len(keep) == 0 {
		return nil, notProfiled(fmt.Sprintf("--test %q: not profiled for both arms", test))
	}
	return keep, nil
}
