package verify

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/storetest"
	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/tune"
)

type fakeLab struct{ name string }

func (l fakeLab) Name() string                            { return l.name }
func (l fakeLab) Endpoint(string) (string, string, error) { return "", "10.0.0.1", nil }
func (l fakeLab) Down(context.Context) error              { return nil }
func (l fakeLab) ChangesHost() bool                       { return false }

type fakeLabs struct{ ups int }

func (f *fakeLabs) Up(_ context.Context, spec *lab.Spec) (experiment.LabInstance, error) {
	f.ups++
	return fakeLab{spec.Source()}, nil
}

// fakeMeasurer answers tcp_lat with 10 µs, and fails one arm if asked.
type fakeMeasurer struct{ failServer string }

func (m fakeMeasurer) Measure(_ context.Context, req experiment.MeasureRequest) (*result.Result, error) {
	if req.Spec.Server == m.failServer {
		return nil, errors.New("this arm cannot run here")
	}
	r := result.New(result.Tool{Name: "fake"}, req.Spec.Test, req.Spec.MsgSize)
	r.Latency = &result.Latency{OneWayNs: result.Dist{Count: 10, Mean: result.F(10000)}}
	return r, nil
}

func setup(t *testing.T, m experiment.Measurer) (Options, *store.DB) {
	t.Helper()
	e, err := experiment.Parse([]byte("name: v\ntests: [tcp_lat]\nrepeats: 2\nduration: 200ms\narms: [{name: a, topology: veth}, {name: b, topology: bridge}]\n"), "v.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.Open(t)
	ks, _ := tune.Select(nil)
	var out bytes.Buffer
	return Options{Experiment: e, Profile: tune.Throughput, Knobs: ks, JournalDir: t.TempDir(), DB: db,
		Out: &out, Progress: &out, Labs: &fakeLabs{}, Measurer: m}, db
}

// Without cobra: two runs stored, nothing applied where the labs have no
// namespaces, and the run says so.
func TestRunStoresBeforeAndAfter(t *testing.T) {
	o, db := setup(t, fakeMeasurer{})
	res, err := Verify(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{res.Before, res.After} {
		ss, err := db.Samples(id)
		if err != nil || len(ss) != 4 {
			t.Fatalf("run %d: %d samples, %v", id, len(ss), err)
		}
	}
	if res.Changes != 0 || !strings.Contains(o.Out.(*bytes.Buffer).String(), "no per-namespace knob differed") {
		t.Errorf("changes %d, output:\n%s", res.Changes, o.Out)
	}
	var cmp bytes.Buffer
	if err := res.WriteComparison(&cmp, db, tune.Throughput, "lab"); err != nil ||
		!strings.Contains(cmp.String(), "A = before, B = after applying the throughput profile (lab scope)") {
		t.Errorf("comparison: %v\n%s", err, cmp.String())
	}
}

// An arm that cannot run fails its steps in both runs; verify still stores
// both and reports the failure at the end.
func TestRunGoesOnWhenStepsFail(t *testing.T) {
	o, db := setup(t, fakeMeasurer{failServer: "10.0.0.1"})
	res, err := Verify(context.Background(), o)
	var sf *experiment.StepsFailedError
	if !errors.As(err, &sf) || res == nil || res.Before == 0 || res.After == 0 {
		t.Fatalf("res %+v, err %v", res, err)
	}
	if r, err := db.GetRun("last"); err != nil || !strings.Contains(r.Name, "-after-") {
		t.Errorf("last run %+v, %v", r, err)
	}
}

// Every flag mistake is found before anything is stored or changed.
func TestCommandRefusesBadFlags(t *testing.T) {
	db := storetest.Untouched(t)
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
