package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/pgtest"
	"github.com/cnibench/cnibench/pkg/result"
)

// The store's tests run on both kinds of database: a SQLite file, and a
// database on a throwaway PostgreSQL cluster started once for the package
// (skipped, with the reason, only where the server is not installed; CI
// installs it).
var pg *pgtest.Postgres
var pgErr error

func TestMain(m *testing.M) {
	pg, pgErr = pgtest.StartPostgres()
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// kind is one kind of results database: where a test's database lives.
type kind struct {
	name string
	// location returns a new, empty database location for t.
	location func(t *testing.T) string
}

var kinds = []kind{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "sub", "results.db") }},
	{"postgres", func(t *testing.T) string {
		if pgErr != nil {
			t.Skipf("no PostgreSQL: %v", pgErr)
		}
		return pg.NewDB(t)
	}},
}

// eachKind runs f as a subtest per kind of database.
func eachKind(t *testing.T, f func(t *testing.T, k kind)) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { f(t, k) })
	}
}

// open opens a new database of kind k at the current schema.
func (k kind) open(t *testing.T) *DB {
	t.Helper()
	d, err := Open(k.location(t))
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
	eachKind(t, func(t *testing.T, k kind) {
		d := k.open(t)
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
	})
}

func TestGetRunUnknown(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		d := k.open(t)
		for _, ref := range []string{"last", "7", "nope"} {
			_, err := d.GetRun(ref)
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("GetRun(%q) error %v, want ErrNotFound", ref, err)
			}
		}
		if err := d.FinishRun(42, true, "ok"); !errors.Is(err, ErrNotFound) {
			t.Errorf("FinishRun(unknown) = %v", err)
		}
	})
}

func TestNamesAreUnambiguous(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		d := k.open(t)
		if _, err := d.CreateRun(&Run{Name: "a"}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"a", "last", "12"} {
			if _, err := d.CreateRun(&Run{Name: name}); err == nil {
				t.Errorf("CreateRun(%q) accepted an ambiguous or duplicate name", name)
			}
		}
	})
}

// Concurrent writers (a runner storing samples from several goroutines)
// must not fail with "database is locked".
func TestConcurrentAddSample(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		d := k.open(t)
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
	})
}

// A database written by any earlier schema version opens with the current
// code, is migrated, and keeps its data; a run named the way `cnibench run`
// named runs before migration 4 gets its experiment name.
func TestMigrateFromEveryVersion(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		for v := 1; v < SchemaVersion(); v++ {
			t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { migrateFrom(t, k, v) })
		}
	})
}

func migrateFrom(t *testing.T, k kind, version int) {
	loc := k.location(t)
	old, err := openVersion(loc, version)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := old.Version(); v != version {
		t.Fatalf("old database at version %d", v)
	}
	// Written with v1's columns only, which every later version has.
	var id int64
	if err := old.queryRow(`INSERT INTO runs(name, kind, experiment, baseline, started, complete, status, host_json)
		VALUES('default-20250102T030405Z', 'lab', 'arms: []', 'host', '2025-01-02T03:04:05Z', 1, 'ok', '{"kernel":"5.10.0"}') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := old.exec(`INSERT INTO arms VALUES(?, 0, 'host', '', 'host', 'builtin', '{}')`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := old.exec(`INSERT INTO runs(name, kind, experiment, baseline, started, complete, status, host_json)
		VALUES('cnb-ab12-k8s', 'k8s', '', '', '2025-01-02T03:04:06Z', 0, '', '{}')`); err != nil {
		t.Fatal(err)
	}
	if err := old.AddSample(&Sample{RunID: id, Seq: 0, Arm: "host", Test: result.TCPLat, MsgSize: 1, Result: latencyResult(7000)}); err != nil {
		t.Fatal(err)
	}
	old.Close()

	d, err := Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if v, _ := d.Version(); v != SchemaVersion() {
		t.Fatalf("migrated database at version %d, want %d", v, SchemaVersion())
	}
	r, err := d.GetRun("default-20250102T030405Z")
	if err != nil {
		t.Fatal(err)
	}
	// Migration 4 names the experiment of a run stored before it; a run
	// written at version 4 or later had the column to fill itself.
	wantExp := "default"
	if version >= 4 {
		wantExp = ""
	}
	if r.Host.Kernel != "5.10.0" || !r.Complete || len(r.Arms) != 1 || r.Labels == nil || len(r.Labels) != 0 || r.ExperimentName != wantExp {
		t.Errorf("migrated run = %+v", r)
	}
	if k8s, err := d.GetRun("cnb-ab12-k8s"); err != nil || k8s.ExperimentName != "" {
		t.Errorf("a run not named by cnibench run: %+v, %v", k8s, err)
	}
	ss, err := d.Samples(r.ID)
	if err != nil || len(ss) != 1 || *ss[0].Result.Latency.OneWayNs.Mean != 7000 {
		t.Errorf("migrated samples = %+v, %v", ss, err)
	}
	// The newer columns are usable on the migrated database.
	if _, err := d.CreateRun(&Run{Name: "new-run", ExperimentName: "e", Labels: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if r, _ := d.GetRun("last"); r.Name != "new-run" || r.Labels["k"] != "v" || r.ExperimentName != "e" {
		t.Errorf("last = %+v", r)
	}
	// A whole record (migration 5's document and timelines) stores on
	// the migrated database.
	if _, err := d.SaveRecord(&Record{Run: &Run{Name: "doc-run", Kind: "disrupt"}, Document: &Document{Schema: "s/v1", JSON: []byte(`{}`)},
		Timelines: []Timeline{{Arm: "a", Probe: "p", JSON: []byte(`[]`)}}}); err != nil {
		t.Fatal(err)
	}
	// Opening again is a no-op.
	d.Close()
	d2, err := Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	d2.Close()
}

func TestNewerSchemaRefused(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		path := k.location(t)
		d, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.exec(`INSERT INTO schema_migrations VALUES(99, 'x')`); err != nil {
			t.Fatal(err)
		}
		d.Close()
		if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "newer than this cnibench") {
			t.Errorf("Open(newer schema) = %v", err)
		}
	})
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
	eachKind(t, func(t *testing.T, k kind) {
		d := k.open(t)
		if _, err := d.CreateRun(&Run{Name: "same"}); err != nil {
			t.Fatal(err)
		}
		_, err := d.CreateRun(&Run{Name: "same"})
		if !errors.Is(err, ErrRunExists) || !strings.Contains(err.Error(), `"same" already exists`) {
			t.Fatalf("second run with the same name: %v", err)
		}
	})
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
	eachKind(t, func(t *testing.T, k kind) {
		d := k.open(t)
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
	})
}

// Twenty runners writing into one database at once, each with its own
// connection (as twenty processes would): every sample is stored exactly
// once, under its own run.
func TestConcurrentRunners(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		loc := k.location(t)
		const writers, samples = 20, 25
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		start := time.Now()
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				d, err := Open(loc)
				if err != nil {
					errs <- err
					return
				}
				defer d.Close()
				id, err := d.CreateRun(&Run{Name: fmt.Sprintf("w%02d", w), ExperimentName: "fleet", Arms: []Arm{{Name: "a"}}})
				if err != nil {
					errs <- err
					return
				}
				for i := 0; i < samples; i++ {
					if err := d.AddSample(&Sample{RunID: id, Seq: i, Arm: "a", Test: result.TCPLat, MsgSize: 1, Repeat: w, Result: latencyResult(float64(1000*w + i))}); err != nil {
						errs <- fmt.Errorf("writer %d sample %d: %w", w, i, err)
						return
					}
				}
				errs <- d.FinishRun(id, true, "ok")
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: %d writers × %d samples in %v", k.name, writers, samples, time.Since(start).Round(time.Millisecond))
		d := k.open(t)
		d.Close()
		d, err := Open(loc)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		runs, err := d.Runs()
		if err != nil || len(runs) != writers {
			t.Fatalf("%d runs, %v", len(runs), err)
		}
		for _, r := range runs {
			ss, err := d.Samples(r.ID)
			if err != nil || len(ss) != samples {
				t.Fatalf("run %s: %d samples, %v", r.Name, len(ss), err)
			}
			for i, s := range ss {
				w := ss[0].Repeat
				if s.Seq != i || s.Repeat != w || *s.Result.Latency.OneWayNs.Mean != float64(1000*w+i) || r.Name != fmt.Sprintf("w%02d", w) {
					t.Fatalf("run %s sample %d mixed up: %+v", r.Name, i, s)
				}
			}
		}
	})
}

// A server that is not there, and one that refuses the user: one line
// each, naming the database without its password, and nothing written.
func TestPostgresUnreachable(t *testing.T) {
	_, err := Open("postgres://cnb:secret@host:notaport/x")
	if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "not a usable PostgreSQL URL") {
		t.Errorf("malformed URL: %v", err)
	}
	if pgErr != nil {
		t.Skipf("no PostgreSQL: %v", pgErr)
	}
	for dsn, want := range map[string]string{
		"postgres://cnb:secret@/x?host=/nonexistent-cnb&sslmode=disable": "no such file or directory",
		strings.Replace(pg.DSN("postgres"), "cnb@", "nobody:secret@", 1): `role "nobody" does not exist`,
	} {
		_, err := Open(dsn)
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%s) = %v; want one line with %q and no password", redact(dsn), err, want)
		}
	}
}

// A record stores whole and reads back byte for byte: the run, its
// samples, its document and its timelines in their order.
func TestSaveRecordRoundTrip(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		d := k.open(t)
		start := time.Date(2026, 11, 27, 5, 0, 0, 123456789, time.UTC)
		doc := []byte(`{"schema":"cnibench.disruption/v1","name":"x","arms":[{"name":"a","timelines":null}],"p":0.1234567890123}`)
		tls := []Timeline{{Arm: "b", Probe: "udp-rr", Seq: 0, JSON: []byte(`{"probe":"udp-rr","buckets":[{"p99_us":null}]}`)},
			{Arm: "a", Probe: "tcp-crr", Seq: 1, JSON: []byte(`{"probe":"tcp-crr"}`)}}
		rec := &Record{Run: &Run{Kind: "disrupt", ExperimentName: "x", Experiment: "name: x\n", Started: start, Status: "ok", Complete: true,
			Arms: []Arm{{Name: "b"}, {Name: "a"}}},
			Samples:  []Sample{{Seq: 0, Arm: "b", Test: "disrupt/udp-rr/blackhole", Result: latencyResult(1)}, {Seq: 1, Arm: "a", Test: "disrupt/udp-rr/blackhole", Error: "lost"}},
			Document: &Document{Schema: "cnibench.disruption/v1", JSON: doc}, Timelines: tls}
		id, err := d.SaveRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.GetRun(rec.Run.Name)
		if err != nil || r.ID != id || r.Kind != "disrupt" || !r.Complete || r.Finished.IsZero() || !r.Started.Equal(start) || len(r.Arms) != 2 {
			t.Fatalf("run = %+v, %v", r, err)
		}
		ss, err := d.Samples(id)
		if err != nil || len(ss) != 2 || ss[0].RunID != id || ss[1].Error != "lost" {
			t.Errorf("samples = %+v, %v", ss, err)
		}
		got, err := d.Document(id)
		if err != nil || got.Schema != "cnibench.disruption/v1" || string(got.JSON) != string(doc) {
			t.Errorf("document = %+v, %v", got, err)
		}
		gt, err := d.Timelines(id)
		if err != nil || len(gt) != 2 {
			t.Fatalf("timelines = %+v, %v", gt, err)
		}
		for i := range tls {
			if gt[i].Arm != tls[i].Arm || gt[i].Probe != tls[i].Probe || string(gt[i].JSON) != string(tls[i].JSON) {
				t.Errorf("timeline %d = %+v, want %+v", i, gt[i], tls[i])
			}
		}
		if _, err := d.Document(id + 1); !errors.Is(err, ErrNoDocument) {
			t.Errorf("a run without a document: %v", err)
		}
	})
}

// A record that fails part way (here its last row) leaves nothing: no
// run, no sample, no document.
func TestSaveRecordAllOrNothing(t *testing.T) {
	eachKind(t, func(t *testing.T, k kind) {
		d := k.open(t)
		twice := Timeline{Arm: "a", Probe: "udp-rr", JSON: []byte(`{}`)}
		_, err := d.SaveRecord(&Record{Run: &Run{Name: "half", Kind: "disrupt", Arms: []Arm{{Name: "a"}}},
			Samples:  []Sample{{Seq: 0, Arm: "a", Test: "t", Result: latencyResult(1)}},
			Document: &Document{Schema: "s", JSON: []byte(`{}`)}, Timelines: []Timeline{twice, twice}})
		if err == nil {
			t.Fatal("a record with the same timeline twice was stored")
		}
		runs, err := d.Runs()
		if err != nil || len(runs) != 0 {
			t.Errorf("runs after a failed save: %+v, %v", runs, err)
		}
		for _, table := range []string{"samples", "arms", "documents", "timelines"} {
			var n int
			if err := d.queryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil || n != 0 {
				t.Errorf("%s after a failed save: %d rows, %v", table, n, err)
			}
		}
	})
}
