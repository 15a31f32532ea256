package experiment

import (
	"errors"
	"io/fs"
	"runtime"
	"testing"

	"github.com/cnibench/cnibench/experiments"
)

// Every ready experiment must parse, so a typo never ships.
func TestReadyExperimentsParse(t *testing.T) {
	names, err := fs.Glob(experiments.Files, "*.yaml")
	if err != nil || len(names) < 7 {
		t.Fatalf("ready experiments: %v %v", names, err)
	}
	for _, n := range names {
		b, _ := fs.ReadFile(experiments.Files, n)
		e, err := Parse(b, n)
		if errors.Is(err, ErrNoSuchCPU) && runtime.NumCPU() < 2 {
			t.Logf("%s: skipped on a one-CPU host: %v", n, err)
			continue
		}
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(e.Plan()) == 0 {
			t.Errorf("%s: empty plan", n)
		}
	}
}
