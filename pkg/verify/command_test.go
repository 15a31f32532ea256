package verify

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/tune"
)

// Every flag mistake is found before anything is stored or changed.
func TestCommandRefusesBadFlags(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	for _, tc := range []struct {
		c    Command
		want string
		is   error
	}{
		{Command{Experiment: "default", Scope: "lab"}, "verify needs --profile", ErrInvalid},
		{Command{Profile: "latency", Scope: "lab"}, "verify needs --profile", ErrInvalid},
		{Command{Profile: "fast", Experiment: "default", Scope: "lab"}, `"fast"`, ErrInvalid},
		{Command{Profile: "latency", Experiment: "default", Scope: "lab", Only: "no.such.knob"}, "no.such.knob", ErrInvalid},
		{Command{Profile: "latency", Experiment: "default", Scope: "host"}, "add --yes", ErrInvalid},
		{Command{Profile: "latency", Experiment: "default", Scope: "everywhere"}, `bad --scope "everywhere"`, ErrInvalid},
		{Command{Profile: "latency", Experiment: "no-such", Scope: "lab"}, "no-such", experiment.ErrInvalid},
		{Command{Profile: "latency", Experiment: "default", Scope: "lab", Run: experiment.RunFlags{Warmup: "x"}}, "--warmup", experiment.ErrInvalid},
	} {
		tc.c.DB = db
		var out, log bytes.Buffer
		err := tc.c.Verify(context.Background(), &out, &log)
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || out.Len() > 0 {
			t.Errorf("%+v: got %v, want %v containing %q", tc.c, err, tc.is, tc.want)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("refused verify created the database")
	}
}

func TestCommandOptions(t *testing.T) {
	o, err := Command{Profile: "throughput", Experiment: "default", Scope: "host", Yes: true, Keep: true,
		JournalDir: "/j", Run: experiment.RunFlags{Repeats: 2}}.Options()
	if err != nil {
		t.Fatal(err)
	}
	if o.Profile != tune.Throughput || !o.Host || !o.Keep || o.JournalDir != "/j" || o.Experiment.Repeats != 2 || len(o.Knobs) == 0 {
		t.Errorf("options %+v", o)
	}
}
