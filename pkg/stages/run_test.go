package stages

import (
	"errors"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/storetest"
	"github.com/cnibench/cnibench/pkg/store"
)

// A run without profiles has no stage report, and explaining it is
// ErrNotProfiled with what to do.
func TestExplainRunNotProfiled(t *testing.T) {
	db := storetest.Open(t)
	run := &store.Run{Name: "plain", Kind: store.KindLab, Started: time.Now()}
	var err error
	if run.ID, err = db.CreateRun(run); err != nil {
		t.Fatal(err)
	}
	if st, err := ForRun(db, run, nil); st != nil || err != nil {
		t.Errorf("ForRun of an unprofiled run: %v %v", st, err)
	}
	if _, err := ExplainRun(db, run, nil, "a", "b", ""); !errors.Is(err, ErrNotProfiled) {
		t.Errorf("ExplainRun: %v", err)
	}
}
