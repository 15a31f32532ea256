package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cnibench/cnibench/pkg/errkind"
)

// Some runs measure what is not a sample of the engine: a disruption run's
// timelines and events. The figures that compare and history read are
// stored as samples (runs, arms, samples as for any run); the document the
// run's own report renders is stored beside them (migration 5), so
// `cnibench disrupt report RUN` prints again what the run printed.

// Document is a run's own result document: its schema name and its JSON,
// less what is stored as timelines.
type Document struct {
	Schema string
	JSON   []byte
}

// Timeline is one probe's timeline of one arm, as JSON.
type Timeline struct {
	Arm   string
	Probe string
	// Seq orders the run's timelines as the run made them.
	Seq  int
	JSON []byte
}

// Record is a whole run, stored at once by SaveRecord: the run with its
// arms, its samples (their RunID is set on save), and its document and
// timelines.
type Record struct {
	Run       *Run
	Samples   []Sample
	Document  *Document
	Timelines []Timeline
}

// ErrNoDocument is wrapped by Document when a run has none (a run of the
// experiment runner, or one stored before migration 5).
var ErrNoDocument = errors.New("no result document")

// SaveRecord stores a finished run in one transaction: all of it, or —
// on any error — nothing, so a failed save leaves no half-written run.
// It sets rec.Run.ID (and its name if empty) and returns the id.
func (d *DB) SaveRecord(rec *Record) (int64, error) {
	r := rec.Run
	if r.Finished.IsZero() {
		r.Finished = time.Now()
	}
	tx, err := d.db.Begin()
	if err != nil {
		return 0, fmt.Errorf("store run %q: %w", r.Name, err)
	}
	defer tx.Rollback() // no-op after Commit
	id, err := d.insertRun(tx, r)
	if err != nil {
		return 0, err
	}
	for i := range rec.Samples {
		rec.Samples[i].RunID = id
		if err := d.insertSample(tx, &rec.Samples[i]); err != nil {
			return 0, err
		}
	}
	if doc := rec.Document; doc != nil {
		if _, err := tx.Exec(d.d.rebind(`INSERT INTO documents(run_id, schema, body_json) VALUES(?,?,?)`), id, doc.Schema, string(doc.JSON)); err != nil {
			return 0, fmt.Errorf("store run %q: document: %w", r.Name, err)
		}
	}
	for _, t := range rec.Timelines {
		if _, err := tx.Exec(d.d.rebind(`INSERT INTO timelines(run_id, arm, seq, probe, timeline_json) VALUES(?,?,?,?,?)`),
			id, t.Arm, t.Seq, t.Probe, string(t.JSON)); err != nil {
			return 0, fmt.Errorf("store run %q: timeline of %s/%s: %w", r.Name, t.Arm, t.Probe, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store run %q: %w", r.Name, err)
	}
	r.ID = id
	return id, nil
}

// Document returns a run's result document; a run without one gives an
// error wrapping ErrNoDocument.
func (d *DB) Document(runID int64) (*Document, error) {
	var doc Document
	var body string
	err := d.queryRow(`SELECT schema, body_json FROM documents WHERE run_id=?`, runID).Scan(&doc.Schema, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %d: %w", runID, ErrNoDocument)
	}
	if err != nil {
		return nil, fmt.Errorf("read the document of run %d: %w", runID, err)
	}
	doc.JSON = []byte(body)
	return &doc, nil
}

// Timelines returns a run's timelines in the order they were stored.
func (d *DB) Timelines(runID int64) ([]Timeline, error) {
	rows, err := d.query(`SELECT arm, seq, probe, timeline_json FROM timelines WHERE run_id=? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("read the timelines of run %d: %w", runID, err)
	}
	defer rows.Close()
	var out []Timeline
	for rows.Next() {
		var t Timeline
		var js string
		if err := rows.Scan(&t.Arm, &t.Seq, &t.Probe, &js); err != nil {
			return nil, fmt.Errorf("read the timelines of run %d: %w", runID, err)
		}
		t.JSON = []byte(js)
		out = append(out, t)
	}
	return out, rows.Err()
}

// DocumentKind is what a run's own report command expects of a stored
// document: its schema, the kind of run in words ("disruption"), the
// command's name for its messages ("disrupt report"), and the error its
// package's input errors match.
type DocumentKind struct {
	Schema, What, Command string
	Invalid               error
}

// LoadDocument loads the run ref (an id, a name or "last") and decodes its
// document, which must be of kind k, into v. A run without a document, or
// with another kind's, is a k.Invalid error that names its kind and says
// how to render it.
func (d *DB) LoadDocument(ref string, k DocumentKind, v any) (*Run, error) {
	run, _, err := d.Load(ref)
	if err != nil {
		return nil, err
	}
	doc, err := d.Document(run.ID)
	switch {
	case errors.Is(err, ErrNoDocument):
		return nil, errkind.Errorf(k.Invalid, "%s: run %s is a %s run, not a %s run; render it with cnibench report %s", k.Command, run.Name, run.Kind, k.What, run.Name)
	case err != nil:
		return nil, err
	case doc.Schema != k.Schema:
		return nil, errkind.Errorf(k.Invalid, "%s: run %s holds a %q document, not a %s run's %q", k.Command, run.Name, doc.Schema, k.What, k.Schema)
	}
	if err := json.Unmarshal(doc.JSON, v); err != nil {
		return nil, fmt.Errorf("%s: run %s: document: %w", k.Command, run.Name, err)
	}
	return run, nil
}
