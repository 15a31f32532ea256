package store

import (
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// migrations[i] brings the schema from version i to i+1. Never edit a
// released migration: append a new one. They are written in SQLite's SQL;
// for PostgreSQL, sqlFor makes the one change the dialects need (64-bit
// integers and an auto-numbered key), so both databases hold the same
// tables, columns and indexes.
var migrations = []migration{
	// 1: runs, their arms and raw samples.
	{sql: `CREATE TABLE runs (
		id         {{serial}},
		name       TEXT NOT NULL UNIQUE,
		kind       TEXT NOT NULL,
		experiment TEXT NOT NULL,
		baseline   TEXT NOT NULL,
		started    TEXT NOT NULL,
		finished   TEXT,
		complete   INTEGER NOT NULL DEFAULT 0,
		status     TEXT NOT NULL DEFAULT '',
		host_json  TEXT NOT NULL
	);
	CREATE TABLE arms (
		run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		seq         INTEGER NOT NULL,
		name        TEXT NOT NULL,
		description TEXT NOT NULL,
		topology    TEXT NOT NULL,
		engine      TEXT NOT NULL,
		knobs_json  TEXT NOT NULL,
		PRIMARY KEY (run_id, name)
	);
	CREATE TABLE samples (
		id          {{serial}},
		run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		seq         INTEGER NOT NULL,
		arm         TEXT NOT NULL,
		engine      TEXT NOT NULL,
		test        TEXT NOT NULL,
		msg_size    INTEGER NOT NULL,
		repeat      INTEGER NOT NULL,
		result_json TEXT,
		error       TEXT NOT NULL DEFAULT ''
	);`},
	// 2: free-form run labels (e.g. the node pair of a k8s run, a note
	// for the multi-host table), and an index so reading one run's samples
	// does not scan every run's.
	{sql: `ALTER TABLE runs ADD COLUMN labels_json TEXT NOT NULL DEFAULT '{}';
	CREATE INDEX samples_by_run ON samples(run_id, seq);`},
	// 3: the CPU profile of a sample's measured window (--profile): folded
	// stacks (bounded to 1 MiB per cell by the writer), or why there is none.
	{sql: `CREATE TABLE profiles (
		run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		seq        INTEGER NOT NULL,
		event      TEXT NOT NULL DEFAULT '',
		frequency  INTEGER NOT NULL DEFAULT 0,
		cpus       INTEGER NOT NULL DEFAULT 0,
		window_ns  INTEGER NOT NULL DEFAULT 0,
		samples    INTEGER NOT NULL DEFAULT 0,
		lost       INTEGER NOT NULL DEFAULT 0,
		period_sum INTEGER NOT NULL DEFAULT 0,
		folded     TEXT NOT NULL DEFAULT '',
		missing    TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (run_id, seq)
	);`},
	// 4: the experiment a run ran, as a column: `history` groups runs by
	// it. Runs stored before it get the name `cnibench run` gave them
	// (<experiment>-<UTC start>[-<suffix>]), the one place that name is
	// still read back.
	{sql: `ALTER TABLE runs ADD COLUMN experiment_name TEXT NOT NULL DEFAULT '';
	CREATE INDEX runs_by_experiment ON runs(experiment_name, id);`, after: backfillExperimentNames},
	// 5: what a run measured that is not engine samples, stored with the
	// run so its own report renders again from the database: its result
	// document (a disruption run's, schema cnibench.disruption/v1, less
	// its timelines) and each arm's timelines, one row per probe (100 ms
	// buckets with the events marked), in the order the run made them.
	{sql: `CREATE TABLE documents (
		run_id    INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
		schema    TEXT NOT NULL,
		body_json TEXT NOT NULL
	);
	CREATE TABLE timelines (
		run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		arm           TEXT NOT NULL,
		seq           INTEGER NOT NULL,
		probe         TEXT NOT NULL,
		timeline_json TEXT NOT NULL,
		PRIMARY KEY (run_id, arm, probe)
	);`},
}

// migration is one schema step: SQL, then (optionally) Go that moves data.
type migration struct {
	sql   string
	after func(tx *sql.Tx, d *dialect) error
}

// sqlFor is the migration's SQL in dialect d.
func (m migration) sqlFor(d *dialect) string {
	q := strings.ReplaceAll(m.sql, "{{serial}}", d.serial)
	if d == postgresDialect {
		// SQLite's INTEGER is 64 bits; PostgreSQL's is 32 (a window_ns
		// of 3 s would not fit).
		q = strings.ReplaceAll(q, "INTEGER", "BIGINT")
	}
	return q
}

// legacyRunName is how `cnibench run` named runs before migration 4: the
// experiment's name, its UTC start time, and a random suffix when two
// started in one second.
var legacyRunName = regexp.MustCompile(`^(.+)-\d{8}T\d{6}Z(?:-[a-z0-9]+)?$`)

func backfillExperimentNames(tx *sql.Tx, d *dialect) error {
	rows, err := tx.Query(`SELECT id, name FROM runs`)
	if err != nil {
		return err
	}
	type named struct {
		id  int64
		exp string
	}
	var todo []named
	for rows.Next() {
		var n named
		var name string
		if err := rows.Scan(&n.id, &name); err != nil {
			rows.Close()
			return err
		}
		if m := legacyRunName.FindStringSubmatch(name); m != nil {
			n.exp = m[1]
			todo = append(todo, n)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, n := range todo {
		if _, err := tx.Exec(d.rebind(`UPDATE runs SET experiment_name=? WHERE id=?`), n.exp, n.id); err != nil {
			return err
		}
	}
	return nil
}

// SchemaVersion is the schema version this code writes.
func SchemaVersion() int { return len(migrations) }

// Version returns the database's schema version.
func (d *DB) Version() (int, error) {
	var v int
	err := d.queryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// migrate applies migrations up to version target, each in its own
// transaction together with its schema_migrations row, so a crash leaves
// the database at a known version. Several processes may open a new
// database at once (a fleet of runners, four `cnibench run`s): each step
// takes the database's write lock first (SQLite: transactions begin
// IMMEDIATE, see Open; PostgreSQL: a transaction-scoped advisory lock) and
// reads the version under it, so a step is applied once, by whoever gets
// there first, and the others see it done.
func (d *DB) migrate(target int) error {
	for {
		done, err := d.migrateStep(target)
		if err != nil || done {
			return err
		}
	}
}

// migrationLock is the PostgreSQL advisory lock key of schema changes
// ("cnbmigr" in ASCII).
const migrationLock = 0x636e626d69677200

// migrateStep applies the next migration if the database is below target,
// and reports whether it is at target.
func (d *DB) migrateStep(target int) (done bool, err error) {
	tx, err := d.db.Begin()
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback() // no-op after Commit
	if d.d == postgresDialect {
		if _, err := tx.Exec(`SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return false, fmt.Errorf("migrate: lock: %w", err)
		}
	}
	if _, err := tx.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at TEXT NOT NULL)`); err != nil {
		return false, fmt.Errorf("create schema_migrations: %w", err)
	}
	var cur int
	if err := tx.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	if cur > len(migrations) {
		return false, fmt.Errorf("schema version %d is newer than this cnibench understands (%d); upgrade cnibench or use another --db", cur, len(migrations))
	}
	if cur >= target {
		return true, tx.Commit()
	}
	v := cur + 1
	m := migrations[v-1]
	if _, err := tx.Exec(m.sqlFor(d.d)); err != nil {
		return false, fmt.Errorf("migrate to schema %d: %w", v, err)
	}
	if m.after != nil {
		if err := m.after(tx, d.d); err != nil {
			return false, fmt.Errorf("migrate to schema %d: %w", v, err)
		}
	}
	if _, err := tx.Exec(d.d.rebind(`INSERT INTO schema_migrations(version, applied_at) VALUES(?, ?)`), v, fmtTime(time.Now())); err != nil {
		return false, fmt.Errorf("migrate to schema %d: %w", v, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate to schema %d: %w", v, err)
	}
	return v >= target, nil
}
