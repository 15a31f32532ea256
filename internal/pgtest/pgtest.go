// Package pgtest runs a throwaway PostgreSQL cluster for tests.
package pgtest

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// Postgres is a throwaway PostgreSQL cluster for the store's tests: Debian's
// server binaries (package postgresql) run from a temporary directory, on a
// unix socket there only (no TCP port), with fsync off. Each test gets a
// database of its own on it.
type Postgres struct {
	dir    string
	pgCtl  string
	asUser []string // runuser prefix when running as root
	admin  string   // DSN of the maintenance database
	n      atomic.Int64
}

// ErrNoPostgres is returned by StartPostgres when the server binaries are
// not installed; tests skip with its message.
var ErrNoPostgres = errors.New("PostgreSQL server not installed (apt-get install postgresql; scripts/install-deps.sh does)")

// StartPostgres initialises and starts a cluster. Call Stop when done
// (TestMain), also on failure.
func StartPostgres() (*Postgres, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		return nil, ErrNoPostgres
	}
	sort.Strings(bins)
	binDir := filepath.Dir(bins[len(bins)-1])
	dir, err := os.MkdirTemp("", "cnb-pg-")
	if err != nil {
		return nil, err
	}
	p := &Postgres{dir: dir, pgCtl: filepath.Join(binDir, "pg_ctl")}
	if os.Geteuid() == 0 {
		// The server refuses to run as root: hand the directory to the
		// postgres account the package created.
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%w: no postgres user: %v", ErrNoPostgres, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		p.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	data := filepath.Join(dir, "data")
	if out, err := p.run(filepath.Join(binDir, "initdb"), "-D", data, "-A", "trust", "-U", "cnb", "--no-sync", "-E", "UTF8"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	opts := fmt.Sprintf("-k %s -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c max_connections=200", dir)
	if out, err := p.run(p.pgCtl, "start", "-w", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	p.admin = p.DSN("postgres")
	return p, nil
}

func (p *Postgres) run(argv ...string) ([]byte, error) {
	argv = append(append([]string(nil), p.asUser...), argv...)
	return exec.Command(argv[0], argv[1:]...).CombinedOutput()
}

// DSN is the URL of database db on the cluster.
func (p *Postgres) DSN(db string) string {
	return "postgres://cnb@/" + db + "?host=" + p.dir + "&sslmode=disable"
}

// Stop stops the cluster and removes its directory.
func (p *Postgres) Stop() {
	if p == nil {
		return
	}
	_, _ = p.run(p.pgCtl, "stop", "-m", "immediate", "-D", filepath.Join(p.dir, "data"))
	os.RemoveAll(p.dir)
}

// NewDB creates an empty database for t and returns its URL; it is dropped
// when the test ends.
func (p *Postgres) NewDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", p.n.Add(1))
	admin, err := sql.Open("pgx", p.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		a, err := sql.Open("pgx", p.admin)
		if err == nil {
			_, _ = a.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
			a.Close()
		}
	})
	return p.DSN(name)
}
