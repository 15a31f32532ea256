package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
)

// seedDB returns the bytes of a small real database: one run with two arms
// and a sample, checkpointed so the whole database is in the main file.
func seedDB(f *testing.F, future bool) []byte {
	f.Helper()
	p := filepath.Join(f.TempDir(), "seed.db")
	d, err := Open(p)
	if err != nil {
		f.Fatal(err)
	}
	id, err := d.CreateRun(&Run{Experiment: "name: x\n", Baseline: "host", Started: time.Unix(1, 0),
		Arms: []Arm{{Name: "host", Topology: "host", Engine: "builtin"}, {Name: "veth", Topology: "veth", Engine: "builtin"}}})
	if err != nil {
		f.Fatal(err)
	}
	r := result.New(result.Tool{Name: "cnibench", Version: "fuzz"}, result.TCPLat, 1)
	r.Latency = &result.Latency{OneWayNs: result.Dist{Count: 1, Mean: result.F(1000)}}
	if err := d.AddSample(&Sample{RunID: id, Arm: "host", Engine: "builtin", Test: result.TCPLat, MsgSize: 1, Result: r}); err != nil {
		f.Fatal(err)
	}
	if future {
		if _, err := d.db.Exec(`INSERT INTO schema_migrations(version, applied_at) VALUES(?, ?)`, len(migrations)+1, "x"); err != nil {
			f.Fatal(err)
		}
	}
	if _, err := d.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		f.Fatal(err)
	}
	d.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzOpenForeign: a results database from another host (`report FILE:REF`)
// that is corrupt, truncated or of a future schema opens with an error or
// reads without a panic; a future schema is always refused.
func FuzzOpenForeign(f *testing.F) {
	good, future := seedDB(f, false), seedDB(f, true)
	f.Add(good)
	f.Add(future)
	f.Add(good[:len(good)/2])
	f.Add([]byte("SQLite format 3\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		p := filepath.Join(t.TempDir(), "foreign.db")
		if err := os.WriteFile(p, in, 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := Open(p)
		if err != nil {
			return
		}
		defer d.Close()
		if v, err := d.Version(); err == nil && v > len(migrations) {
			t.Fatalf("opened a database of schema %d (this code knows %d)", v, len(migrations))
		}
		runs, err := d.Runs()
		if err != nil {
			return
		}
		for _, r := range runs {
			_, _ = d.GetRun(r.Name)
			_, _ = d.Samples(r.ID)
		}
	})
}
