package store

import (
	"fmt"
	"time"
)

// migrations[i] brings the schema from version i to i+1. Never edit a
// released migration: append a new one.
var migrations = []string{
	// 1: runs, their arms and raw samples.
	`CREATE TABLE runs (
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
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
		id          INTEGER PRIMARY KEY AUTOINCREMENT,
		run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		seq         INTEGER NOT NULL,
		arm         TEXT NOT NULL,
		engine      TEXT NOT NULL,
		test        TEXT NOT NULL,
		msg_size    INTEGER NOT NULL,
		repeat      INTEGER NOT NULL,
		result_json TEXT,
		error       TEXT NOT NULL DEFAULT ''
	);`,
	// 2: free-form run labels (e.g. the node pair of a k8s run, a note
	// for the multi-host table), and an index so reading one run's samples
	// does not scan every run's.
	`ALTER TABLE runs ADD COLUMN labels_json TEXT NOT NULL DEFAULT '{}';
	CREATE INDEX samples_by_run ON samples(run_id, seq);`,
	// 3: the CPU profile of a sample's measured window (--profile): folded
	// stacks (bounded to 1 MiB per cell by the writer), or why there is none.
	`CREATE TABLE profiles (
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
	);`,
}

// SchemaVersion is the schema version this code writes.
func SchemaVersion() int { return len(migrations) }

// Version returns the database's schema version.
func (d *DB) Version() (int, error) {
	var v int
	err := d.db.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// migrate applies migrations up to version target, each in its own
// transaction together with its schema_migrations row, so a crash leaves
// the database at a known version.
func (d *DB) migrate(target int) error {
	if _, err := d.db.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	cur, err := d.Version()
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if cur > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this cnibench understands (%d); upgrade cnibench or use another --db", cur, len(migrations))
	}
	for v := cur + 1; v <= target; v++ {
		tx, err := d.db.Begin()
		if err != nil {
			return fmt.Errorf("migrate to schema %d: %w", v, err)
		}
		if _, err := tx.Exec(migrations[v-1]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate to schema %d: %w", v, err)
		}
		if _, err := tx.Exec(`INSERT INTO schema_migrations(version, applied_at) VALUES(?, ?)`, v, fmtTime(time.Now())); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate to schema %d: %w", v, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate to schema %d: %w", v, err)
		}
	}
	return nil
}
