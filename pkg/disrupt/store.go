package disrupt

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
)

// A disruption result in the results database (pkg/store): the run (kind,
// the experiment's name and text, started), one arm per arm, one sample per
// event and probe whose figures compare and history read
// (result.Disruption, test disrupt/<probe>/<kind>), and — for `disrupt
// report RUN` — the result document and each arm's timelines, from which
// Stored rebuilds the Result the run printed.

// KindLab is the stored kind of `cnibench disrupt run`'s runs. Another
// runner of disruption experiments stores under its own kind.
const KindLab = "disrupt"

// StoreOptions is what a stored run holds beside its Result.
type StoreOptions struct {
	// Kind is the run's kind (KindLab for `disrupt run`).
	Kind    string
	Version string // cnibench's, for the samples' tool
	Host    result.Fingerprint
	Labels  map[string]string
	// Err is why the run stopped before its last arm; the run is then
	// stored incomplete, with Err as its status.
	Err error
}

// Measured reports whether r holds a measurement: a run that failed before
// any arm's probes were judged has nothing to store.
func Measured(r *Result) bool {
	if r == nil {
		return false
	}
	for _, a := range r.Arms {
		if len(a.Timelines) > 0 {
			return true
		}
	}
	return false
}

// Record is r as the results database stores it.
func Record(r *Result, o StoreOptions) (*store.Record, error) {
	if o.Kind == "" {
		return nil, errors.New("store disruption result: no run kind")
	}
	run := &store.Run{Name: runid.Name(runid.New(), o.Kind), Kind: o.Kind, ExperimentName: r.Name, Experiment: r.Spec,
		Baseline: r.Baseline, Started: r.Started, Complete: o.Err == nil, Status: "ok", Host: o.Host, Labels: o.Labels}
	if o.Err != nil {
		run.Status = o.Err.Error()
	}
	rec := &store.Record{Run: run, Document: &store.Document{Schema: r.Schema}}
	doc := *r
	doc.Arms = make([]*ArmResult, len(r.Arms))
	for i, a := range r.Arms {
		desc := "probes to " + a.Target
		if a.LabID != "" { // a run on a cluster has no lab
			desc += " (lab " + a.LabID + ")"
		}
		run.Arms = append(run.Arms, store.Arm{Name: a.Name, Topology: a.Topology, Engine: "builtin", Knobs: a.Knobs, Description: desc})
		// The timelines are stored as rows of their own; the document
		// keeps the rest of the arm.
		bare := *a
		bare.Timelines = nil
		doc.Arms[i] = &bare
		for _, tl := range a.Timelines {
			js, err := json.Marshal(tl)
			if err != nil {
				return nil, fmt.Errorf("store timeline %s/%s: %w", a.Name, tl.Probe, err)
			}
			rec.Timelines = append(rec.Timelines, store.Timeline{Arm: a.Name, Probe: tl.Probe, Seq: len(rec.Timelines), JSON: js})
			rec.Samples = append(rec.Samples, eventSamples(r, a, tl, len(rec.Samples), o.Version)...)
		}
	}
	js, err := json.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("store disruption result: %w", err)
	}
	rec.Document.JSON = js
	return rec, nil
}

// eventSamples are a timeline's events as samples, numbered from seq on;
// Repeat counts the events of one kind (a revert is its kind, as Compare
// judges it).
func eventSamples(r *Result, a *ArmResult, tl *Timeline, seq int, version string) []store.Sample {
	var out []store.Sample
	n := map[string]int{}
	for _, e := range tl.Events {
		test := result.DisruptionTest(tl.Probe, e.Kind)
		res := result.New(result.Tool{Name: "cnibench", Version: version}, test, 0)
		res.Server = a.Target
		res.Start = r.Started
		from := e.StartMs - tl.WindowLeadMs
		res.DurationSeconds = (e.WindowEndMs - from) / 1e3
		res.Disruption = &result.Disruption{Probe: tl.Probe, Event: e.Kind, Label: e.Label, StartMs: e.StartMs,
			LongestGapMs: e.LongestGapMs, Lost: e.Failed + e.Timeouts, RecoverMs: e.RecoverMs, P99Us: e.P99Us, AgentCPUMs: e.AgentCPUMs}
		if e.RecoverMs == nil {
			res.SetMissing("disruption.recover_ms", orReason(e.RecoverReason, "the probe did not recover within the window"))
		}
		if e.P99Us == nil {
			res.SetMissing("disruption.p99_us", "no request was answered in the event's window")
		}
		if e.AgentCPUMs == nil {
			res.SetMissing("disruption.agent_cpu_ms", orReason(e.AgentCPUReason, "not measured for this event"))
		}
		out = append(out, store.Sample{Seq: seq + len(out), Arm: a.Name, Engine: "builtin", Test: test, Repeat: n[e.Kind], Result: res})
		n[e.Kind]++
	}
	return out
}

func orReason(reason, otherwise string) string {
	if reason != "" {
		return reason
	}
	return otherwise
}

// Save stores r in db, all of it or nothing, and returns the stored run.
func Save(db *store.DB, r *Result, o StoreOptions) (*store.Run, error) {
	rec, err := Record(r, o)
	if err != nil {
		return nil, err
	}
	if _, err := db.SaveRecord(rec); err != nil {
		return nil, err
	}
	return rec.Run, nil
}

// Stored reads back the Result a stored disruption run was saved from, by
// run id, name or "last". A run that is not a disruption run is an
// ErrInvalid naming its kind.
func Stored(db *store.DB, ref string) (*Result, *store.Run, error) {
	var r Result
	run, err := db.LoadDocument(ref, store.DocumentKind{Schema: Schema, What: "disruption", Command: "disrupt report", Invalid: ErrInvalid}, &r)
	if err != nil {
		return nil, nil, err
	}
	tls, err := db.Timelines(run.ID)
	if err != nil {
		return nil, nil, err
	}
	arms := map[string]*ArmResult{}
	for _, a := range r.Arms {
		arms[a.Name] = a
	}
	for _, t := range tls {
		a := arms[t.Arm]
		if a == nil {
			return nil, nil, fmt.Errorf("disrupt report: run %s: a timeline of arm %q, which the run does not have", run.Name, t.Arm)
		}
		tl := &Timeline{}
		if err := json.Unmarshal(t.JSON, tl); err != nil {
			return nil, nil, fmt.Errorf("disrupt report: run %s: timeline %s/%s: %w", run.Name, t.Arm, t.Probe, err)
		}
		a.Timelines = append(a.Timelines, tl)
	}
	return &r, run, nil
}
