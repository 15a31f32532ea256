package k8s

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
	corev1 "k8s.io/api/core/v1"
)

// memSink is a store.Sink in memory.
type memSink struct {
	run      *store.Run
	samples  []*store.Sample
	complete bool
	status   string
	updated  int
}

func (m *memSink) Begin(r *store.Run) (int64, error) { m.run = r; return 42, nil }
func (m *memSink) Add(s *store.Sample, _ *store.Profile) error {
	m.samples = append(m.samples, s)
	return nil
}
func (m *memSink) Update(_ int64, host result.Fingerprint, labels map[string]string) error {
	m.run.Host, m.run.Labels = host, labels
	m.updated++
	return nil
}
func (m *memSink) End(_ int64, complete bool, status string) error {
	m.complete, m.status = complete, status
	return nil
}

// Record stores through the sink as the run goes: a failed client pod is a
// failed sample per planned test and size, and the run ends incomplete with
// the runner's error as its status.
func TestRecordStoresThroughSink(t *testing.T) {
	fc := failingServiceClients(t)
	o := testOptions()
	r, plan := fc.prepare(t, o)
	sink := &memSink{}
	rec, err := r.Record(context.Background(), plan, o, []int{1}, sink, "test", "# flags\n")
	if err == nil || rec.RunID != 42 || sink.run == nil || sink.complete || sink.status != err.Error() {
		t.Fatalf("rec %+v err %v sink %+v", rec, err, sink)
	}
	if sink.updated != 1 {
		t.Errorf("run host updated %d times after the node probe, want 1", sink.updated)
	}
	if rec.Stored != len(sink.samples) || len(rec.Samples) != 8 {
		t.Errorf("stored %d, sink has %d, %d pods", rec.Stored, len(sink.samples), len(rec.Samples))
	}
	failed := 0
	for i, s := range sink.samples {
		if s.RunID != 42 || s.Seq != i+1 {
			t.Errorf("sample %d: run %d seq %d", i, s.RunID, s.Seq)
		}
		if s.Error != "" {
			failed++
		}
	}
	if failed != 2*2 { // two failed pods × (tcp_lat, udp_lat) at one size
		t.Errorf("%d failed samples, want 4", failed)
	}
}

func TestRunFlags(t *testing.T) {
	ok := RunFlags{Scenarios: "all", Tests: "tcp_lat, udp_bw", MsgSizes: "64,1K", Duration: time.Second, Parallel: 1, Repeats: 2, SettleIdle: 70}
	o, sizes, err := ok.Options()
	if err != nil || len(o.Scenarios) != len(AllScenarios) || len(o.Client.Tests) != 2 || o.Client.MsgSizes != "64,1K" ||
		sizes[1] != 1024 || o.Client.Duration != "1s" || o.MeasureTimeout != 4*2*time.Second+2*time.Minute || o.SettleIdle != 70 {
		t.Fatalf("%+v %v %v", o, sizes, err)
	}
	for _, c := range []struct {
		edit func(*RunFlags)
		want string
	}{
		{func(f *RunFlags) { f.Scenarios = "nodeport" }, "--scenarios"},
		{func(f *RunFlags) { f.Tests = "tcp_rr" }, `--test "tcp_rr"`},
		{func(f *RunFlags) { f.Tests, f.MsgSizes = "udp_bw", "70000" }, "--msg-size for udp_bw"},
		{func(f *RunFlags) { f.Parallel = 0 }, "--parallel 0"},
		{func(f *RunFlags) { f.Repeats = 0 }, "--repeats"},
		{func(f *RunFlags) { f.Services = MaxServices + 1 }, "--services"},
		{func(f *RunFlags) { f.Warmup = -time.Second }, "--warmup"},
		{func(f *RunFlags) { f.SettleIdle = -1 }, "--settle-idle"},
		{func(f *RunFlags) { f.SettleIdle = 0.5 }, "--settle-idle"},
		{func(f *RunFlags) { f.SettleIdle = 100 }, "--settle-idle"},
		{func(f *RunFlags) { f.SettleIdle = 250 }, "--settle-idle"},
	} {
		f := ok
		c.edit(&f)
		_, _, err := f.Options()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an ErrInvalid with %q", f, err, c.want)
		}
	}
}

func TestResolveImage(t *testing.T) {
	if ref, pp, err := ResolveImage("reg/x:1", "Never", "v"); err != nil || ref != "reg/x:1" || pp != corev1.PullNever {
		t.Errorf("%s %s %v", ref, pp, err)
	}
	if _, _, err := ResolveImage("reg/x:1", "Sometimes", "v"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad policy: %v", err)
	}
}
