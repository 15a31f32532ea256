package tune

import (
	"fmt"
	"os"

	"github.com/cnibench/cnibench/pkg/runid"
)

// Change is one planned or applied write.
type Change struct {
	Knob   string `json:"knob"`
	Netns  string `json:"netns,omitempty"`
	Target string `json:"target,omitempty"`
	Old    string `json:"old"`
	New    string `json:"new"`
	Error  string `json:"error,omitempty"`
}

// Skip is a knob apply did not change, and why.
type Skip struct {
	Knob   string `json:"knob"`
	Netns  string `json:"netns,omitempty"`
	Target string `json:"target,omitempty"`
	Reason string `json:"reason"`
}

// ApplyOptions says what to apply where.
type ApplyOptions struct {
	Env     *Env
	Profile Profile
	Knobs   []*Knob
	// Netns, when not empty, restricts apply to per-namespace knobs inside
	// these namespaces (lab scope). Empty means the host.
	Netns []string
	// ScopeLabel is recorded in the journal (host, lab:<name>, netns:<name>).
	ScopeLabel string
	DryRun     bool
	JournalDir string
}

// ApplyReport is what apply did.
type ApplyReport struct {
	Journal string   `json:"journal,omitempty"`
	Changes []Change `json:"changes"`
	Skipped []Skip   `json:"skipped"`
}

// Failed counts changes that did not take.
func (r *ApplyReport) Failed() int {
	n := 0
	for _, c := range r.Changes {
		if c.Error != "" {
			n++
		}
	}
	return n
}

// afterWrite is called after every host write of apply; tests use it to
// kill the process between two writes.
var afterWrite func(n int)

type plannedChange struct {
	knob *Knob
	env  *Env
	f    Finding
}

// plan audits the selected knobs and returns what apply would write.
func plan(o ApplyOptions) ([]plannedChange, []Skip) {
	var envs []*Env
	if len(o.Netns) == 0 {
		envs = []*Env{o.Env}
	} else {
		for _, n := range o.Netns {
			envs = append(envs, o.Env.WithNetns(n))
		}
	}
	var plan []plannedChange
	var skips []Skip
	for _, e := range envs {
		var ks []*Knob
		for _, k := range o.Knobs {
			if len(o.Netns) > 0 && k.Scope != ScopeNetns {
				continue // lab scope touches namespaces only, never the host
			}
			ks = append(ks, k)
		}
		for _, f := range Audit(e, ks, []Profile{o.Profile}) {
			sk := Skip{Knob: f.Knob, Netns: f.Netns, Target: f.Target}
			switch {
			case f.Status == StatusOK, f.Status == StatusNoRec:
				continue
			case f.Status == StatusCannotRead:
				sk.Reason = "cannot read: " + f.Why
			case f.AuditOnly || f.knob.Write == nil:
				sk.Reason = "audit only: " + f.knob.Why
			case f.want == "":
				sk.Reason = "differs but nothing to write: " + f.Why
			default:
				plan = append(plan, plannedChange{knob: f.knob, env: e, f: f})
				continue
			}
			skips = append(skips, sk)
		}
	}
	return plan, skips
}

// Apply writes the journal first, then changes the host knob by knob. A knob
// that fails is recorded and the rest continue; the returned error is only
// for failures that leave nothing safe to do (the journal cannot be written).
func Apply(o ApplyOptions) (*ApplyReport, error) {
	if o.JournalDir == "" {
		o.JournalDir = DefaultJournalDir
	}
	todo, skips := plan(o)
	rep := &ApplyReport{Skipped: skips, Changes: []Change{}}
	if rep.Skipped == nil {
		rep.Skipped = []Skip{}
	}
	for _, p := range todo {
		rep.Changes = append(rep.Changes, Change{Knob: p.knob.ID, Netns: p.env.Netns, Target: p.f.Target,
			Old: p.f.Current, New: p.f.want})
	}
	if o.DryRun || len(todo) == 0 {
		return rep, nil
	}
	unlock, err := lockDir(o.JournalDir)
	if err != nil {
		return rep, err
	}
	defer unlock()
	id := runid.New()
	j, err := createJournal(o.JournalDir, id)
	if err != nil {
		return rep, err
	}
	defer j.close()
	rep.Journal = j.path
	host, _ := os.Hostname()
	if err := j.append(Entry{Type: "begin", ID: id, Profile: o.Profile, Scope: o.ScopeLabel, Host: host}); err != nil {
		return rep, err
	}
	for i, p := range todo {
		e := Entry{Type: "change", Seq: i + 1, Knob: p.knob.ID, KnobScope: p.knob.Scope, Netns: p.env.Netns,
			Target: p.f.Target, Old: p.f.cur.Raw, OldAbsent: p.f.cur.Absent, New: p.f.want}
		if err := j.append(e); err != nil {
			// Without a durable record the change must not happen.
			for k := i; k < len(todo); k++ {
				rep.Changes[k].Error = "not applied: " + err.Error()
			}
			return rep, err
		}
		werr := writeKnob(p.env, p.knob, p.f.Target, p.f.want, false)
		res := Entry{Type: "result", Seq: i + 1, OK: werr == nil}
		if werr != nil {
			res.Error = werr.Error()
			rep.Changes[i].Error = werr.Error()
		}
		if afterWrite != nil {
			afterWrite(i + 1)
		}
		if err := j.append(res); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func writeKnob(e *Env, k *Knob, target, value string, absent bool) error {
	if k.Write == nil {
		return fmt.Errorf("knob %s cannot be written", k.ID)
	}
	if k.Scope == ScopeNetns {
		return e.do(func() error { return k.Write(e, target, value, absent) })
	}
	return k.Write(e, target, value, absent)
}
