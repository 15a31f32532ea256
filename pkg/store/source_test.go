package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// OpenExisting never creates a database: a mistyped --db is ErrNoDatabase
// and leaves no file.
func TestOpenExistingMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "typo.db")
	if _, err := OpenExisting(p); !errors.Is(err, ErrNoDatabase) || !strings.Contains(err.Error(), "run an experiment first") {
		t.Fatalf("got %v, want ErrNoDatabase", err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenExisting left %s behind", p)
	}
}

// References resolve in the default database and as FILE:REF in another;
// an unknown one is ErrNotFound with a hint, "last" of an empty database
// says to run something first.
func TestSourcesLoad(t *testing.T) {
	dir := t.TempDir()
	mk := func(name, arm string) string {
		p := filepath.Join(dir, name+".db")
		d, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		id, err := d.CreateRun(&Run{Name: name, Kind: KindLab, Started: time.Now(), Arms: []Arm{{Name: arm}, {Name: "other"}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.AddSample(&Sample{RunID: id, Arm: arm, Test: "tcp_lat", MsgSize: 1, Result: latencyResult(1000)}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := mk("run-a", "host"), mk("run-b", "veth")
	s := NewSources(a)
	defer s.Close()
	l, err := s.Load("last")
	if err != nil || l.Run.Name != "run-a" || len(l.Samples) != 1 || l.DB.Path() != a {
		t.Fatalf("last: %+v %v", l, err)
	}
	l, err = s.Load(b + ":run-b")
	if err != nil || l.Run.Name != "run-b" || l.Samples[0].Arm != "veth" {
		t.Fatalf("FILE:REF: %+v %v", l, err)
	}
	if _, err := s.Load("nosuch"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "cnibench runs") {
		t.Errorf("unknown run: %v", err)
	}
	empty := kinds[0].open(t)
	if _, _, err := empty.Load("last"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no runs stored") {
		t.Errorf("last of an empty database: %v", err)
	}
	if err := l.Run.Rebase("other"); err != nil || l.Run.Baseline != "other" {
		t.Errorf("rebase: %v %q", err, l.Run.Baseline)
	}
	if err := l.Run.Rebase("nope"); err == nil || !strings.Contains(err.Error(), "arms: veth, other") {
		t.Errorf("rebase to an unknown arm: %v", err)
	}
}

func TestSplitArm(t *testing.T) {
	for _, c := range []struct{ in, run, arm string }{
		{"7@base", "7", "base"}, {"last", "last", ""}, {"db.sqlite:7@vxlan", "db.sqlite:7", "vxlan"},
		{"/tmp/a@b/r.db:3", "/tmp/a@b/r.db:3", ""}, {"@x", "@x", ""}, {"7@", "7@", ""},
	} {
		if r, a := SplitArm(c.in); r != c.run || a != c.arm {
			t.Errorf("SplitArm(%q) = %q, %q; want %q, %q", c.in, r, a, c.run, c.arm)
		}
	}
}

// FILE:REF and URL:REF name runs in a SQLite file and in a PostgreSQL
// database, side by side in one Sources.
func TestSourcesAcrossKinds(t *testing.T) {
	if pgErr != nil {
		t.Skipf("no PostgreSQL: %v", pgErr)
	}
	file, url := kinds[0].location(t), kinds[1].location(t)
	for _, loc := range []string{file, url} {
		d, err := Open(loc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.CreateRun(&Run{Name: "r-" + dialectOf(loc).name, Arms: []Arm{{Name: "a"}}}); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	s := NewSources(file)
	defer s.Close()
	for ref, want := range map[string]string{"last": "r-sqlite", file + ":last": "r-sqlite", url + ":last": "r-postgres", url + ":r-postgres": "r-postgres"} {
		l, err := s.Load(ref)
		if err != nil || l.Run.Name != want {
			t.Errorf("Load(%q) = %+v, %v; want run %s", ref, l.Run, err, want)
		}
	}
	if _, _, err := s.Resolve(url); err != nil {
		t.Errorf("a URL with a port-free path and no REF: %v", err)
	}
}
