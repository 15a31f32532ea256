package experiment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/profile"
)

func TestRunFlagsApply(t *testing.T) {
	e, err := Load("default")
	if err != nil {
		t.Fatal(err)
	}
	f := RunFlags{Repeats: 2, Duration: 300 * time.Millisecond, Warmup: "50ms", Arms: []string{e.Arms[0].Name}}
	if err := f.Apply(e); err != nil {
		t.Fatal(err)
	}
	if e.Repeats != 2 || len(e.Arms) != 1 {
		t.Errorf("repeats %d arms %d after the overrides", e.Repeats, len(e.Arms))
	}
	for _, bad := range []RunFlags{{Warmup: "soon"}, {Precision: "lots"}, {Budget: "5"}, {Repeats: -1}, {Arms: []string{"nope"}}} {
		e, _ := Load("default")
		if err := bad.Apply(e); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want ErrInvalid", bad, err)
		}
	}
}

// Everything the command line can get wrong is ErrInvalid, found before
// the run starts (nothing is printed, no database is opened).
func TestRunCommandRefusesBadInput(t *testing.T) {
	db := t.TempDir() + "/r.db"
	for _, c := range []RunCommand{
		{Ref: "no-such-experiment", Format: "table"},
		{Ref: "default", Format: "pdf"},
		{Ref: "default", Format: "none", Flags: RunFlags{Warmup: "x"}},
		{Ref: "default", Format: "none", Profile: profile.Flags{On: true, Rate: 99, Arms: []string{"nope"}}},
	} {
		c.Local.DBPath = db
		var out bytes.Buffer
		err := c.Run(context.Background(), &out, io.Discard)
		if !errors.Is(err, ErrInvalid) || out.Len() > 0 {
			t.Errorf("%+v: got %v, printed %q; want ErrInvalid", c, err, out.String())
		}
	}
	// The --profile flags are checked first, by their own package.
	for _, f := range []profile.Flags{{On: true, Rate: 0}, {Arms: []string{"host"}}} {
		c := RunCommand{Ref: "no-such-experiment", Format: "pdf", Profile: f, Local: LocalOptions{DBPath: db}}
		if err := c.Run(context.Background(), &bytes.Buffer{}, io.Discard); !errors.Is(err, profile.ErrInvalid) {
			t.Errorf("%+v: got %v, want profile.ErrInvalid", f, err)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("a refused run created the database")
	}
	err := RunCommand{Ref: "default", Format: "pdf"}.Run(context.Background(), &bytes.Buffer{}, io.Discard)
	if err == nil || !strings.HasPrefix(err.Error(), `--format "pdf": want table`) {
		t.Errorf("format error %q: want it to start with the flag", err)
	}
}

// Runs that measured something are reported whatever went wrong after; a
// run that never started is not.
func TestMeasuredErrorsAreReported(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{ErrInterrupted, true},
		{&StepsFailedError{1, 2}, true},
		{&TeardownError{errors.New("busy")}, true},
		{errors.Join(ErrInterrupted, &TeardownError{errors.New("busy")}), true},
		{fmt.Errorf("store run: %w", errors.New("disk full")), false},
	} {
		if got := measured(c.err); got != c.want {
			t.Errorf("measured(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
