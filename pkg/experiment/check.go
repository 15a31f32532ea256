package experiment

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/wakeup"
)

// ErrInvalid is wrapped by every error that says an experiment file cannot
// run as written; the CLI exits 2 for it, before anything is stored or built.
var ErrInvalid = errors.New("invalid experiment")

// ErrMissingTool is wrapped when an arm's engine is a tool this host lacks.
var ErrMissingTool = errors.New("missing tool")

// Check verifies that every arm can run as written, without touching the
// kernel, the network or the database: its topology (preset or file) resolves
// and takes its knobs, its client and server endpoints exist in that
// topology, and its engine is registered, has each of the arm's tests and
// builds a command for each message size (which is where a tool's own limits
// live: sockperf's 14-byte and iperf3's 16-byte minimums). An experiment
// that passes Check fails at run time only for what the host decides:
// a kernel without a feature, a busy port.
func (e *Experiment) Check() error {
	for i := range e.Arms {
		a := &e.Arms[i]
		if err := e.checkArm(a); err != nil {
			if a.line > 0 {
				return fmt.Errorf("%w: line %d: arm %q: %w", ErrInvalid, a.line, a.Name, err)
			}
			return fmt.Errorf("%w: arm %q: %w", ErrInvalid, a.Name, err)
		}
	}
	return nil
}

func (e *Experiment) checkArm(a *Arm) error {
	server := "192.0.2.1" // any address: building a command needs one
	if a.Topology != "" {
		spec, err := lab.Resolve(a.Topology, e.Dir, a.Knobs)
		if err != nil {
			return fmt.Errorf("topology %s: %w", a.Topology, err)
		}
		a.lab = spec
		eps := spec.EndpointNames()
		for _, ep := range []struct{ field, name string }{{"client", a.Client}, {"server", a.Server}} {
			if !contains(eps, ep.name) {
				return fmt.Errorf("field %s: %s has no endpoint %q (endpoints: %s)", ep.field, a.Topology, ep.name, strings.Join(eps, ", "))
			}
		}
	} else {
		server = a.ServerAddress
	}
	d, err := driver.Lookup(a.Engine)
	if err != nil {
		return fmt.Errorf("field engine: %w", err)
	}
	for _, t := range e.ArmTests(a) {
		if err := d.Supports(t); err != nil {
			return fmt.Errorf("engine %s: %w", a.Engine, err)
		}
		for _, size := range e.Sizes(t) {
			spec := driver.Spec{Server: server, Test: t, MsgSize: int(size), Duration: time.Duration(e.Duration),
				Warmup: time.Duration(e.Warmup), Parallel: max(1, e.Parallel), RateBps: e.RateBps}
			if err := driver.CheckSpec(d, spec, a.Topology != ""); err != nil {
				return fmt.Errorf("engine %s, %s at %d bytes: %w", a.Engine, t, size, err)
			}
		}
	}
	return nil
}

// Preflight checks what the host must offer before a run starts: every
// arm's engine is installed. It runs after Check and before the run is
// stored, so a missing tool leaves nothing behind.
func (e *Experiment) Preflight() error {
	seen := map[string]bool{}
	for i := range e.Arms {
		a := &e.Arms[i]
		if seen[a.Engine] {
			continue
		}
		seen[a.Engine] = true
		d, err := driver.Lookup(a.Engine)
		if err != nil {
			return fmt.Errorf("%w: arm %q: %w", ErrInvalid, a.Name, err)
		}
		if err := d.Installed(); err != nil {
			return fmt.Errorf("%w: arm %q: %w", ErrMissingTool, a.Name, err)
		}
	}
	return nil
}

// Overrides are the command line's changes to a parsed experiment.
type Overrides struct {
	Repeats  int           // 0 keeps the file's
	Duration time.Duration // 0 keeps the file's
	Warmup   *time.Duration
	Arms     []string // run only these arms, in the file's order; nil keeps all
	// Precision and Budget make the run precision-driven (see refine.go);
	// nil keeps the file's.
	Precision *float64
	Budget    *time.Duration
	// Wakeup and CPUs replace the experiment's (and every arm's) policy
	// and placement; "" keeps them.
	Wakeup string
	CPUs   string
	// RetakeDisturbed true turns retaking on; false keeps the file's.
	RetakeDisturbed bool
}

// Override applies o and checks the result again; its errors wrap
// ErrInvalid and name the flag.
func (e *Experiment) Override(o Overrides) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
	}
	if o.Repeats < 0 || o.Repeats > MaxRepeats {
		return bad("--repeats %d: want 1-%d", o.Repeats, MaxRepeats)
	}
	if o.Repeats > 0 {
		e.Repeats = o.Repeats
	}
	if o.Duration < 0 || (o.Duration > 0 && o.Duration < 100*time.Millisecond) {
		return bad("--duration %v: want ≥ 100ms", o.Duration)
	}
	if o.Duration > 0 {
		e.Duration = Duration(o.Duration)
	}
	if o.Warmup != nil {
		if *o.Warmup < 0 {
			return bad("--warmup %v: must not be negative", *o.Warmup)
		}
		e.Warmup = Duration(*o.Warmup)
	}
	if o.Precision != nil {
		if p := *o.Precision; p <= 0 || p > MaxPrecision || math.IsNaN(p) {
			return bad("--precision %.4g%%: want more than 0%% and at most %.0f%%", p*100, MaxPrecision*100)
		}
		e.Precision = Percent(*o.Precision)
	}
	if o.Budget != nil {
		if *o.Budget <= 0 {
			return bad("--budget %v: want a positive duration, e.g. 5m", *o.Budget)
		}
		if e.Precision == 0 {
			return bad("--budget needs a precision target (--precision 5%% or precision: in the file)")
		}
		e.Budget = Duration(*o.Budget)
	}
	if len(o.Arms) > 0 {
		var keep []Arm
		for _, name := range o.Arms {
			found := false
			for _, a := range e.Arms {
				if a.Name == name {
					keep = append(keep, a)
					found = true
				}
			}
			if !found {
				all := make([]string, 0, len(e.Arms))
				for _, a := range e.Arms {
					all = append(all, a.Name)
				}
				return bad("--arms: no arm %q in experiment %s (arms: %s)", name, e.Name, strings.Join(all, ", "))
			}
		}
		e.Arms = keep
		if !contains(o.Arms, e.Baseline) {
			e.Baseline = ""
		}
	}
	if err := e.checkPrecision(); err != nil {
		return bad("%v", err)
	}
	if o.Wakeup != "" {
		if _, err := wakeup.Parse(o.Wakeup); err != nil {
			return bad("--wakeup: %v", err)
		}
		e.Wakeup = o.Wakeup
		for i := range e.Arms {
			e.Arms[i].Wakeup = ""
		}
	}
	if o.RetakeDisturbed {
		e.RetakeDisturbed = true
	}
	if o.CPUs != "" {
		if _, err := ParsePlacement(o.CPUs, usableCPUs()); err != nil {
			return bad("--%v", err)
		}
		e.CPUs = o.CPUs
		for i := range e.Arms {
			e.Arms[i].CPUs = ""
		}
	}
	return e.Check()
}
