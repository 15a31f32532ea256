package pressure

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/cnibench/cnibench/pkg/atomicfile"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
)

// A pressure run in the results database (pkg/store), as a disruption run
// is stored (pkg/disrupt/store.go): the run (kind, the experiment's name and
// text, started), one arm per arm, one sample per ramp that ran to its end
// whose figures compare and history read (result.Pressure, test
// pressure/<held flows>), and — for `pressure report RUN` — the whole
// document, from which Stored gives back what the run printed.

// Kind is the stored kind of `cnibench pressure`'s runs.
const Kind = "pressure"

// StoreOptions is what a stored run holds beside its Document.
type StoreOptions struct {
	Version string // cnibench's, for the samples' tool
	Host    result.Fingerprint
	// Experiment is the experiment file's text; Baseline its baseline arm
	// ("" when that arm was not ramped).
	Experiment, Baseline string
	// Err is why the run or one of its ramps did not run to its end; the
	// run is then stored incomplete, with Err as its status.
	Err error
}

// Measured reports whether d holds a measurement: a run whose every ramp
// failed before its first step has nothing to store.
func Measured(d *Document) bool {
	if d == nil {
		return false
	}
	for _, a := range d.Arms {
		for _, r := range a.Ramps {
			if len(r.Steps) > 0 {
				return true
			}
		}
	}
	return false
}

// Record is d as the results database stores it.
func Record(d *Document, o StoreOptions) (*store.Record, error) {
	started, err := time.Parse(time.RFC3339, d.Started)
	if err != nil {
		return nil, fmt.Errorf("store pressure result: started %q: %w", d.Started, err)
	}
	run := &store.Run{Name: runid.Name(runid.New(), Kind), Kind: Kind, ExperimentName: d.Experiment, Experiment: o.Experiment,
		Baseline: o.Baseline, Started: started, Complete: o.Err == nil, Status: "ok", Host: o.Host}
	if o.Err != nil {
		run.Status = o.Err.Error()
	}
	js, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("store pressure result: %w", err)
	}
	rec := &store.Record{Run: run, Document: &store.Document{Schema: d.Schema, JSON: js}}
	for _, a := range d.Arms {
		run.Arms = append(run.Arms, store.Arm{Name: a.Arm, Topology: a.Topology, Engine: "builtin", Knobs: a.Knobs,
			Description: fmt.Sprintf("%d pressure ramps", len(a.Ramps))})
		n := map[int]int{}
		for _, r := range a.Ramps {
			res := rampResult(d, started, &r, o.Version)
			if res == nil {
				continue
			}
			rec.Samples = append(rec.Samples, store.Sample{Seq: len(rec.Samples), Arm: a.Arm, Engine: "builtin",
				Test: res.Test, Repeat: n[r.Flows], Result: res})
			n[r.Flows]++
		}
	}
	return rec, nil
}

// rampResult is a ramp as a sample's result; nil for a ramp that did not
// run to its end, whose knee and peak would be those of a shorter ramp.
func rampResult(d *Document, started time.Time, r *Ramp, version string) *result.Result {
	if r.Error != "" || len(r.Steps) == 0 {
		return nil
	}
	res := result.New(result.Tool{Name: "cnibench", Version: version}, result.PressureTest(r.Flows), 0)
	res.Start = started
	res.DurationSeconds = float64(len(r.Steps)) * time.Duration(d.Config.Step).Seconds()
	p := &result.Pressure{Flows: r.Flows}
	for _, s := range r.Steps {
		p.PeakPerS = max(p.PeakPerS, s.AchievedRate)
	}
	switch k := r.Knee; {
	case k == nil:
		res.SetMissing("pressure.knee_per_s", "no knee: "+r.NoKnee)
	case k.LastGoodRate == nil:
		p.FailedOfferedPerS, p.Cause = result.F(k.FailedOffered), k.Cause
		res.SetMissing("pressure.knee_per_s", fmt.Sprintf("the first step, %.0f/s offered, already failed (%s)", k.FailedOffered, k.Cause))
	default:
		p.KneePerS, p.FailedOfferedPerS, p.Cause = result.F(*k.LastGoodRate), result.F(k.FailedOffered), k.Cause
	}
	res.Pressure = p
	return res
}

// Save stores d in db, all of it or nothing, and returns the stored run.
func Save(db *store.DB, d *Document, o StoreOptions) (*store.Run, error) {
	rec, err := Record(d, o)
	if err != nil {
		return nil, err
	}
	if _, err := db.SaveRecord(rec); err != nil {
		return nil, err
	}
	return rec.Run, nil
}

// Stored reads back the Document a stored pressure run was saved from, by
// run id, name or "last". A run that is not a pressure run is an
// ErrInvalid naming its kind.
func Stored(db *store.DB, ref string) (*Document, *store.Run, error) {
	var d Document
	run, err := db.LoadDocument(ref, store.DocumentKind{Schema: Schema, What: "pressure", Command: "pressure report", Invalid: ErrInvalid}, &d)
	if err != nil {
		return nil, nil, err
	}
	return &d, run, nil
}

// WriteJSON prints d as the cnibench.pressure/v1 document.
func WriteJSON(w io.Writer, d *Document) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// ReportCommand is `cnibench pressure report RUN`: a stored run printed
// again, as its run printed it.
type ReportCommand struct {
	Ref    string // a run id, name or "last"
	DB     string
	JSON   bool
	Output string // write here instead of stdout
}

// Run prints the report.
func (c *ReportCommand) Run(stdout io.Writer) error {
	db, err := store.OpenExisting(c.DB)
	if err != nil {
		return err
	}
	defer db.Close()
	d, _, err := Stored(db, c.Ref)
	if err != nil {
		return err
	}
	write := func(w io.Writer) error {
		if c.JSON {
			return WriteJSON(w, d)
		}
		WriteText(w, d)
		return nil
	}
	if c.Output == "" || c.Output == "-" {
		return write(stdout)
	}
	if err := atomicfile.Write(c.Output, 0o644, write); err != nil {
		return fmt.Errorf("pressure report: %w", err)
	}
	return nil
}
