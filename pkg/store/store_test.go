package store

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
)

func openTemp(t *testing.T) *DB {
	t.Helper()
	d, err := Open(filepath.Join(t.TempDir(), "sub", "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func latencyResult(oneWayNs float64) *result.Result {
	r := result.New(result.Tool{Name: "cnibench", Version: "test"}, result.TCPLat, 1)
	r.Latency = &result.Latency{OneWayNs: result.Dist{Count: 10, Mean: result.F(oneWayNs)}}
	r.SetMissing("cpu.server.steal_pct", "no /proc/stat in the server's container")
	return r
}

func TestRoundTrip(t *testing.T) {
	d := openTemp(t)
	start := time.Date(2026, 11, 22, 4, 0, 0, 123456789, time.UTC)
	run := &Run{Kind: KindLab, Experiment: "name: x\n", Baseline: "host", Started: start,
		Host:   result.Fingerprint{Hostname: "h1", Kernel: "6.1.0", Governor: "performance", Cores: 2},
		Labels: map[string]string{"note": "first"},
		Arms: []Arm{
			{Name: "host", Topology: "host", Engine: "builtin"},
			{Name: "vxlan", Description: "overlay", Topology: "vxlan", Engine: "qperf", Knobs: map[string]string{"mtu": "1450"}},
		}}
	id, err := d.CreateRun(run)
	if err != nil {
		t.Fatal(err)
	}
	if id != run.ID || !strings.HasPrefix(run.Name, "cnb-") {
		t.Fatalf("CreateRun set id %d name %q", run.ID, run.Name)
	}
	for i, v := range []float64{9000, 9500} {
		if err := d.AddSample(&Sample{RunID: id, Seq: i, Arm: "vxlan", Engine: "qperf", Test: result.TCPLat, MsgSize: 1, Repeat: i, Result: latencyResult(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.AddSample(&Sample{RunID: id, Seq: 2, Arm: "host", Engine: "builtin", Test: result.TCPLat, MsgSize: 1, Error: "server did not answer"}); err != nil {
		t.Fatal(err)
	}
	if err := d.FinishRun(id, false, "interrupted"); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"1", run.Name, "last"} {
		got, err := d.GetRun(ref)
		if err != nil {
			t.Fatalf("GetRun(%q): %v", ref, err)
		}
		if got.ID != id || got.Baseline != "host" || got.Host.Kernel != "6.1.0" || got.Labels["note"] != "first" ||
			got.Complete || got.Status != "interrupted" || got.Finished.IsZero() || !got.Started.Equal(start) ||
			len(got.Arms) != 2 || got.Arms[1].Knobs["mtu"] != "1450" || got.Arms[1].Description != "overlay" {
			t.Errorf("GetRun(%q) = %+v", ref, got)
		}
	}
	ss, err := d.Samples(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 3 || *ss[1].Result.Latency.OneWayNs.Mean != 9500 || ss[0].Result.Missing["cpu.server.steal_pct"] == "" ||
		ss[2].Result != nil || ss[2].Error != "server did not answer" {
		t.Errorf("samples = %+v", ss)
	}
	runs, err := d.Runs()
	if err != nil || len(runs) != 1 || len(runs[0].Arms) != 2 {
		t.Errorf("Runs() = %+v, %v", runs, err)
	}
	counts, err := d.SampleCounts()
	if err != nil || counts[id] != 3 {
		t.Errorf("SampleCounts() = %v, %v", counts, err)
	}
}

func TestGetRunUnknown(t *testing.T) {
	d := openTemp(t)
	for _, ref := range []string{"last", "7", "nope"} {
		_, err := d.GetRun(ref)
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("GetRun(%q) error %v, want ErrNotFound", ref, err)
		}
	}
	if err := d.FinishRun(42, true, "ok"); !errors.Is(err, ErrNotFound) {
		t.Errorf("FinishRun(unknown) = %v", err)
	}
}

func TestNamesAreUnambiguous(t *testing.T) {
	d := openTemp(t)
	if _, err := d.CreateRun(&Run{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "last", "12"} {
		if _, err := d.CreateRun(&Run{Name: name}); err == nil {
			t.Errorf("CreateRun(%q) accepted an ambiguous or duplicate name", name)
		}
	}
}

// Concurrent writers (a runner storing samples from several goroutines)
// must not fail with "database is locked".
func TestConcurrentAddSample(t *testing.T) {
	d := openTemp(t)
	id, err := d.CreateRun(&Run{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- d.AddSample(&Sample{RunID: id, Seq: i, Arm: "a", Test: result.TCPLat, MsgSize: 1, Result: latencyResult(1000)})
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ss, _ := d.Samples(id)
	if len(ss) != 40 {
		t.Errorf("stored %d of 40 samples", len(ss))
	}
}

// A database written by schema version 1 (before labels and the samples
// index) opens with the current code, is migrated, and keeps its data.
func TestMigrateFromV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	old, err := openVersion(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := old.Version(); v != 1 {
		t.Fatalf("old database at version %d", v)
	}
	// Written with v1's columns only: CreateRun of today needs labels_json.
	if _, err := old.db.Exec(`INSERT INTO runs(name, kind, experiment, baseline, started, complete, status, host_json)
		VALUES('old-run', 'lab', 'arms: []', 'host', '2025-01-02T03:04:05Z', 1, 'ok', '{"kernel":"5.10.0"}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := old.db.Exec(`INSERT INTO arms VALUES(1, 0, 'host', '', 'host', 'builtin', '{}')`); err != nil {
		t.Fatal(err)
	}
	if err := old.AddSample(&Sample{RunID: 1, Seq: 0, Arm: "host", Test: result.TCPLat, MsgSize: 1, Result: latencyResult(7000)}); err != nil {
		t.Fatal(err)
	}
	old.Close()

	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if v, _ := d.Version(); v != SchemaVersion() || v != 3 {
		t.Fatalf("migrated database at version %d, want 3", v)
	}
	r, err := d.GetRun("old-run")
	if err != nil {
		t.Fatal(err)
	}
	if r.Host.Kernel != "5.10.0" || !r.Complete || len(r.Arms) != 1 || r.Labels == nil || len(r.Labels) != 0 {
		t.Errorf("migrated run = %+v", r)
	}
	ss, err := d.Samples(r.ID)
	if err != nil || len(ss) != 1 || *ss[0].Result.Latency.OneWayNs.Mean != 7000 {
		t.Errorf("migrated samples = %+v, %v", ss, err)
	}
	var idx int
	if err := d.db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type='index' AND name='samples_by_run'`).Scan(&idx); err != nil || idx != 1 {
		t.Errorf("migration 2 index missing (%d, %v)", idx, err)
	}
	// The new column is usable on the migrated database.
	if _, err := d.CreateRun(&Run{Name: "new-run", Labels: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if r, _ := d.GetRun("last"); r.Name != "new-run" || r.Labels["k"] != "v" {
		t.Errorf("last = %+v", r)
	}
	// Opening again is a no-op.
	d.Close()
	d2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d2.Close()
}

func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.db.Exec(`INSERT INTO schema_migrations VALUES(99, 'x')`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "newer than this cnibench") {
		t.Errorf("Open(newer schema) = %v", err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("CNIBENCH_DB", "")
	t.Setenv("XDG_DATA_HOME", "/x/data")
	if p := DefaultPath(); p != "/x/data/cnibench/results.db" {
		t.Errorf("DefaultPath() = %q", p)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/u")
	if p := DefaultPath(); p != "/home/u/.local/share/cnibench/results.db" {
		t.Errorf("DefaultPath() = %q", p)
	}
	t.Setenv("CNIBENCH_DB", "/tmp/x.db")
	if p := DefaultPath(); p != "/tmp/x.db" {
		t.Errorf("DefaultPath() = %q", p)
	}
}

func TestCreateRunNameTaken(t *testing.T) {
	d := openTemp(t)
	if _, err := d.CreateRun(&Run{Name: "same"}); err != nil {
		t.Fatal(err)
	}
	_, err := d.CreateRun(&Run{Name: "same"})
	if !errors.Is(err, ErrRunExists) || !strings.Contains(err.Error(), `"same" already exists`) {
		t.Fatalf("second run with the same name: %v", err)
	}
}

func TestProfilesRoundTrip(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	id, err := d.CreateRun(&Run{Name: "r", Kind: "lab", Started: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Profiles(id); len(got) != 0 {
		t.Fatalf("a run without profiles has %d", len(got))
	}
	want := &Profile{RunID: id, Seq: 3, Event: "cpu-clock", Frequency: 499, CPUs: 2, WindowNs: 1e9,
		Samples: 998, Lost: 1, PeriodSum: 2e9, Folded: "a;b 5\nc 1\n"}
	if err := d.AddProfile(want); err != nil {
		t.Fatal(err)
	}
	if err := d.AddProfile(&Profile{RunID: id, Seq: 4, Missing: "the client ended before its warmup did"}); err != nil {
		t.Fatal(err)
	}
	got, err := d.Profiles(id)
	if err != nil || len(got) != 2 || *got[3] != *want || got[4].Missing == "" {
		t.Fatalf("Profiles = %+v, %v", got, err)
	}
	if err := d.AddProfile(want); err == nil {
		t.Error("a second profile for one sample was stored")
	}
}

func TestUpdateRunHost(t *testing.T) {
	d := openTemp(t)
	id, err := d.CreateRun(&Run{Name: "k", Kind: KindK8s, Host: result.Fingerprint{Hostname: "k8s"}, Labels: map[string]string{"a": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.UpdateRunHost(id, result.Fingerprint{Hostname: "k8s [flannel vxlan]"}, map[string]string{"k8s.cni": "flannel"}); err != nil {
		t.Fatal(err)
	}
	r, err := d.GetRun("k")
	if err != nil {
		t.Fatal(err)
	}
	if r.Host.Hostname != "k8s [flannel vxlan]" || r.Labels["k8s.cni"] != "flannel" || r.Labels["a"] != "" {
		t.Errorf("after update: host %+v labels %v", r.Host, r.Labels)
	}
	if err := d.UpdateRunHost(id+1, result.Fingerprint{}, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
}
