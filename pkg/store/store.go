// Package store keeps every run cnibench makes in a results database — one
// SQLite file by default, or a shared PostgreSQL database (dialect.go): the
// environment fingerprint, the experiment text, the arms (topology, knobs,
// engine) and every raw sample as its full result JSON, so a report can be
// recomputed, and runs from different hosts compared, long after the fact.
//
// The schema is versioned: schema_migrations records which of the
// migrations in migrations.go have been applied, and Open applies the
// missing ones in one transaction each.
package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"

	// pure-Go drivers: no cgo, so the static binary keeps working
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// Run kinds.
const (
	KindLab         = "lab"
	KindK8s         = "k8s"
	KindCrosscheck  = "crosscheck"
	KindTuneVerify  = "tune-verify"
	timeLayout      = time.RFC3339Nano
	envDB           = "CNIBENCH_DB"
	refLast         = "last"
	defaultFileName = "results.db"
)

// ErrNotFound is wrapped by GetRun when no run matches the reference.
var ErrNotFound = errors.New("run not found")

// Run is one execution of an experiment.
type Run struct {
	ID   int64
	Name string // unique; generated as cnb-<id>-<kind> when empty
	Kind string // lab | k8s | crosscheck | tune-verify | k8s-latency | disrupt …
	// ExperimentName is the name field of the experiment the run ran
	// ("" for runs that had none, such as a k8s run's command line): what
	// `history` groups runs by.
	ExperimentName string
	// Experiment is the experiment file's text, as run.
	Experiment string
	// Baseline names the arm other arms are divided by ("× host").
	Baseline string
	Arms     []Arm
	Started  time.Time
	Finished time.Time // zero while running
	// Complete is true only when every planned sample was taken.
	Complete bool
	Status   string // free text, e.g. "ok" or "interrupted after 12/40 samples"
	Host     result.Fingerprint
	Labels   map[string]string
}

// Arm is one datapath configuration being measured.
type Arm struct {
	Name, Description, Topology, Engine string
	Knobs                               map[string]string
}

// Sample is one measurement of one arm, test and message size. Result is
// nil when the measurement failed; Error then says why.
type Sample struct {
	RunID   int64
	Seq     int // position in the run's execution order
	Arm     string
	Engine  string
	Test    string
	MsgSize int
	Repeat  int
	Result  *result.Result
	Error   string
}

// DB is an open results database. It is safe for concurrent use.
type DB struct {
	db   *sql.DB
	path string // as given (a file, or a postgres:// URL)
	d    *dialect
}

// The query helpers take queries written with ? placeholders, as SQLite
// reads them, and rebind them for PostgreSQL.
func (d *DB) exec(q string, args ...any) (sql.Result, error) {
	return d.db.Exec(d.d.rebind(q), args...)
}
func (d *DB) query(q string, args ...any) (*sql.Rows, error) {
	return d.db.Query(d.d.rebind(q), args...)
}
func (d *DB) queryRow(q string, args ...any) *sql.Row { return d.db.QueryRow(d.d.rebind(q), args...) }

// ErrRunExists is wrapped by CreateRun when the name is taken.
var ErrRunExists = errors.New("run exists")

// DefaultPath is $CNIBENCH_DB if set, else $XDG_DATA_HOME/cnibench/results.db,
// else ~/.local/share/cnibench/results.db.
func DefaultPath() string {
	if p := os.Getenv(envDB); p != "" {
		return p
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "cnibench", defaultFileName)
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "."
	}
	return filepath.Join(home, ".local", "share", "cnibench", defaultFileName)
}

// Open opens (creating it and its directory if needed) the database at path
// and migrates it to the current schema.
func Open(path string) (*DB, error) { return openVersion(path, len(migrations)) }

// openVersion opens the database and migrates it to version target; tests
// use it to build databases with an older schema.
func openVersion(path string, target int) (*DB, error) {
	if path == "" {
		path = DefaultPath()
	}
	if IsPostgres(path) {
		return openPostgres(path, target)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open results database %s: %w", path, err)
	}
	// WAL lets `cnibench report` read while a run writes; the busy timeout
	// makes a concurrent writer wait instead of failing.
	// Transactions begin IMMEDIATE: a writer takes the write lock when it
	// begins, where the busy timeout applies, not when it first writes,
	// where SQLite would fail at once rather than deadlock.
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open results database %s: %w", path, err)
	}
	// One connection serialises writers inside this process; SQLite
	// allows only one writer anyway.
	sdb.SetMaxOpenConns(1)
	return migrated(&DB{db: sdb, path: path, d: sqliteDialect}, target)
}

// migrated brings a newly opened database to version target, closing it
// if that fails.
func migrated(d *DB, target int) (*DB, error) {
	if err := d.migrate(target); err != nil {
		d.db.Close()
		return nil, fmt.Errorf("open results database %s: %w", d.Path(), err)
	}
	return d, nil
}

// Path names the database for messages: the file, or the URL without its
// password.
func (d *DB) Path() string { return redact(d.path) }

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// CreateRun inserts r with its arms, sets r.ID (and r.Name if empty) and
// returns the id.
func (d *DB) CreateRun(r *Run) (int64, error) {
	tx, err := d.db.Begin()
	if err != nil {
		return 0, fmt.Errorf("create run %q: %w", r.Name, err)
	}
	defer tx.Rollback() // no-op after Commit
	id, err := d.insertRun(tx, r)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("create run %q: %w", r.Name, err)
	}
	r.ID = id
	return id, nil
}

// insertRun inserts r (defaults filled in) and its arms within tx and
// returns the new id.
func (d *DB) insertRun(tx *sql.Tx, r *Run) (int64, error) {
	if r.Kind == "" {
		r.Kind = KindLab
	}
	if r.Name == "" {
		r.Name = runid.Name(runid.New(), r.Kind)
	}
	if err := checkName(r.Name); err != nil {
		return 0, err
	}
	if r.Started.IsZero() {
		r.Started = time.Now()
	}
	host, err := json.Marshal(r.Host)
	if err != nil {
		return 0, fmt.Errorf("create run %q: %w", r.Name, err)
	}
	labels, err := json.Marshal(nonNil(r.Labels))
	if err != nil {
		return 0, fmt.Errorf("create run %q: %w", r.Name, err)
	}
	// RETURNING rather than LastInsertId, which PostgreSQL's driver lacks.
	var id int64
	err = tx.QueryRow(d.d.rebind(`INSERT INTO runs(name, kind, experiment_name, experiment, baseline, started, finished, complete, status, host_json, labels_json)
		VALUES(?,?,?,?,?,?,?,?,?,?,?) RETURNING id`),
		r.Name, r.Kind, r.ExperimentName, r.Experiment, r.Baseline, fmtTime(r.Started), nullTime(r.Finished), b2i(r.Complete), r.Status, string(host), string(labels)).Scan(&id)
	if err != nil {
		if d.d.unique(err) {
			return 0, fmt.Errorf("create run: %w: a run named %q already exists; choose another name", ErrRunExists, r.Name)
		}
		return 0, fmt.Errorf("create run %q: %w", r.Name, err)
	}
	for i, a := range r.Arms {
		knobs, err := json.Marshal(nonNil(a.Knobs))
		if err != nil {
			return 0, fmt.Errorf("create run %q: arm %q: %w", r.Name, a.Name, err)
		}
		if _, err := tx.Exec(d.d.rebind(`INSERT INTO arms(run_id, seq, name, description, topology, engine, knobs_json) VALUES(?,?,?,?,?,?,?)`),
			id, i, a.Name, a.Description, a.Topology, a.Engine, string(knobs)); err != nil {
			return 0, fmt.Errorf("create run %q: arm %q: %w", r.Name, a.Name, err)
		}
	}
	return id, nil
}

// checkName rejects names GetRun could not tell from an id or "last".
func checkName(name string) error {
	if name == refLast {
		return fmt.Errorf("create run: the name %q is reserved for the latest run; choose another name", name)
	}
	if _, err := strconv.ParseInt(name, 10, 64); err == nil {
		return fmt.Errorf("create run: the name %q looks like a run id; use a name with a letter in it", name)
	}
	return nil
}

// AddSample stores one sample of a run.
func (d *DB) AddSample(s *Sample) error { return d.insertSample(d.db, s) }

// execer is what inserts run in: the database, or one transaction.
type execer interface {
	Exec(q string, args ...any) (sql.Result, error)
}

func (d *DB) insertSample(ex execer, s *Sample) error {
	var res any // NULL when the measurement failed
	if s.Result != nil {
		b, err := json.Marshal(s.Result)
		if err != nil {
			return fmt.Errorf("store sample %d of run %d: %w", s.Seq, s.RunID, err)
		}
		res = string(b)
	}
	_, err := ex.Exec(d.d.rebind(`INSERT INTO samples(run_id, seq, arm, engine, test, msg_size, repeat, result_json, error) VALUES(?,?,?,?,?,?,?,?,?)`),
		s.RunID, s.Seq, s.Arm, s.Engine, s.Test, s.MsgSize, s.Repeat, res, s.Error)
	if err != nil {
		return fmt.Errorf("store sample %d of run %d: %w", s.Seq, s.RunID, err)
	}
	return nil
}

// FinishRun records the end of a run: when, whether every planned sample
// was taken, and a status line.
func (d *DB) FinishRun(id int64, complete bool, status string) error {
	res, err := d.exec(`UPDATE runs SET finished=?, complete=?, status=? WHERE id=?`,
		fmtTime(time.Now()), b2i(complete), status, id)
	if err != nil {
		return fmt.Errorf("finish run %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("finish run %d: %w", id, ErrNotFound)
	}
	return nil
}

// UpdateRunHost replaces a run's host fingerprint and labels: what a run
// learns about its target after it started (a Kubernetes run probes its
// nodes once its namespace exists).
func (d *DB) UpdateRunHost(id int64, host result.Fingerprint, labels map[string]string) error {
	h, err := json.Marshal(host)
	if err != nil {
		return fmt.Errorf("update run %d: %w", id, err)
	}
	l, err := json.Marshal(nonNil(labels))
	if err != nil {
		return fmt.Errorf("update run %d: %w", id, err)
	}
	res, err := d.exec(`UPDATE runs SET host_json=?, labels_json=? WHERE id=?`, string(h), string(l), id)
	if err != nil {
		return fmt.Errorf("update run %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("update run %d: %w", id, ErrNotFound)
	}
	return nil
}

const runColumns = `id, name, kind, experiment_name, experiment, baseline, started, finished, complete, status, host_json, labels_json`

// Runs returns every stored run, oldest first, with its arms.
func (d *DB) Runs() ([]Run, error) {
	rows, err := d.query(`SELECT ` + runColumns + ` FROM runs ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var runs []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("list runs: %w", err)
		}
		runs = append(runs, *r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	arms, err := d.arms(0)
	if err != nil {
		return nil, err
	}
	for i := range runs {
		runs[i].Arms = arms[runs[i].ID]
	}
	return runs, nil
}

// GetRun finds a run by numeric id, by name, or "last" for the most recent
// one. An unknown reference gives an error wrapping ErrNotFound.
func (d *DB) GetRun(ref string) (*Run, error) {
	var row *sql.Row
	if ref == refLast {
		row = d.queryRow(`SELECT ` + runColumns + ` FROM runs ORDER BY id DESC LIMIT 1`)
	} else if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		row = d.queryRow(`SELECT `+runColumns+` FROM runs WHERE id=?`, id)
	} else {
		row = d.queryRow(`SELECT `+runColumns+` FROM runs WHERE name=?`, ref)
	}
	r, err := scanRun(row)
	if errors.Is(err, sql.ErrNoRows) {
		if ref == refLast {
			return nil, fmt.Errorf("no runs stored in %s yet: %w", d.path, ErrNotFound)
		}
		return nil, fmt.Errorf("run %q: %w", ref, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read run %q: %w", ref, err)
	}
	arms, err := d.arms(r.ID)
	if err != nil {
		return nil, err
	}
	r.Arms = arms[r.ID]
	return r, nil
}

// Samples returns a run's samples in execution order. The rows are read
// first and their JSON decoded after, so the connection (SQLite's one) is
// free for another reader while this one decodes.
func (d *DB) Samples(runID int64) ([]Sample, error) {
	rows, err := d.query(`SELECT seq, arm, engine, test, msg_size, repeat, result_json, error
		FROM samples WHERE run_id=? ORDER BY seq, id`, runID)
	if err != nil {
		return nil, fmt.Errorf("read samples of run %d: %w", runID, err)
	}
	var out []Sample
	var raw []sql.NullString
	for rows.Next() {
		s := Sample{RunID: runID}
		var js sql.NullString
		if err := rows.Scan(&s.Seq, &s.Arm, &s.Engine, &s.Test, &s.MsgSize, &s.Repeat, &js, &s.Error); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read samples of run %d: %w", runID, err)
		}
		out, raw = append(out, s), append(raw, js)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read samples of run %d: %w", runID, err)
	}
	for i, js := range raw {
		if !js.Valid {
			continue
		}
		r, err := result.Decode([]byte(js.String))
		if err != nil {
			return nil, fmt.Errorf("read sample %d of run %d: %w", out[i].Seq, runID, err)
		}
		out[i].Result = r
	}
	return out, nil
}

// SampleCounts returns the number of samples per run id, for listings.
func (d *DB) SampleCounts() (map[int64]int, error) {
	rows, err := d.query(`SELECT run_id, COUNT(*) FROM samples GROUP BY run_id`)
	if err != nil {
		return nil, fmt.Errorf("count samples: %w", err)
	}
	defer rows.Close()
	out := map[int64]int{}
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("count samples: %w", err)
		}
		out[id] = n
	}
	return out, rows.Err()
}

// arms returns arms by run id, for one run (runID > 0) or all.
func (d *DB) arms(runID int64) (map[int64][]Arm, error) {
	q := `SELECT run_id, name, description, topology, engine, knobs_json FROM arms`
	var args []any
	if runID > 0 {
		q += ` WHERE run_id=?`
		args = append(args, runID)
	}
	rows, err := d.query(q+` ORDER BY run_id, seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("read arms: %w", err)
	}
	defer rows.Close()
	out := map[int64][]Arm{}
	for rows.Next() {
		var id int64
		var a Arm
		var knobs string
		if err := rows.Scan(&id, &a.Name, &a.Description, &a.Topology, &a.Engine, &knobs); err != nil {
			return nil, fmt.Errorf("read arms: %w", err)
		}
		if err := json.Unmarshal([]byte(knobs), &a.Knobs); err != nil {
			return nil, fmt.Errorf("read arm %q of run %d: knobs: %w", a.Name, id, err)
		}
		out[id] = append(out[id], a)
	}
	return out, rows.Err()
}

type scanner interface{ Scan(...any) error }

func scanRun(s scanner) (*Run, error) {
	var r Run
	var started string
	var finished sql.NullString
	var host, labels string
	var complete int64
	if err := s.Scan(&r.ID, &r.Name, &r.Kind, &r.ExperimentName, &r.Experiment, &r.Baseline, &started, &finished,
		&complete, &r.Status, &host, &labels); err != nil {
		return nil, err
	}
	r.Complete = complete != 0
	var err error
	if r.Started, err = time.Parse(timeLayout, started); err != nil {
		return nil, fmt.Errorf("run %d: started: %w", r.ID, err)
	}
	if finished.Valid {
		if r.Finished, err = time.Parse(timeLayout, finished.String); err != nil {
			return nil, fmt.Errorf("run %d: finished: %w", r.ID, err)
		}
	}
	if err := json.Unmarshal([]byte(host), &r.Host); err != nil {
		return nil, fmt.Errorf("run %d: host fingerprint: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
		return nil, fmt.Errorf("run %d: labels: %w", r.ID, err)
	}
	return &r, nil
}

func fmtTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return fmtTime(t)
}

// b2i stores a boolean as the INTEGER both dialects' schema holds.
func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
