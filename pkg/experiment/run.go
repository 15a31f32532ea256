package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/wakeup"
)

// LabProvider builds lab topologies. The production implementation wraps
// pkg/lab; tests use a fake.
type LabProvider interface {
	// Up builds an arm's topology as Check resolved it: its knobs were
	// read and checked there, once.
	Up(ctx context.Context, spec *lab.Spec) (LabInstance, error)
}

// LabInstance is a built topology.
type LabInstance interface {
	Name() string
	// Endpoint returns the namespace ("" = this one) and address of an endpoint.
	Endpoint(name string) (netns, ip string, err error)
	// Down removes the lab; it must work with a fresh context after the run's
	// context was cancelled.
	Down(ctx context.Context) error
	// ChangesHost reports whether the lab changed host-wide settings while it
	// is up (e.g. net.core.rmem_max, which is not per-namespace on some
	// kernels). Such a lab would skew every other arm measured meanwhile.
	ChangesHost() bool
}

// upLab builds the arm's lab from the spec Check resolved. An arm Check
// never saw has no resolved spec, and its knobs are not read here.
func upLab(ctx context.Context, labs LabProvider, a *Arm) (LabInstance, error) {
	if a.lab == nil {
		return nil, fmt.Errorf("arm %q: topology %s was not resolved (the experiment was not checked)", a.Name, a.Topology)
	}
	return labs.Up(ctx, a.lab)
}

// MeasureRequest is one measurement: which engine, what, and where.
type MeasureRequest struct {
	Engine      string
	Spec        driver.Spec
	ClientNetns string
	ServerNetns string
	// StartServer is false when the server already runs (server_address arms).
	StartServer bool
}

// Measurer runs one measurement. The production implementation starts the
// engine's server and client as processes in the given namespaces.
type Measurer interface {
	Measure(ctx context.Context, req MeasureRequest) (*result.Result, error)
}

// Sink receives the run as it happens, so an interrupted run keeps what it
// finished. The production implementation writes to pkg/store.
type Sink interface {
	Begin(e *Experiment) (runID int64, err error)
	Sample(runID int64, s Sample) error
	End(runID int64, complete bool, status string) error
}

// Sample is one finished (or failed) step.
type Sample struct {
	Step   Step
	Arm    *Arm
	Result *result.Result // nil when Error is set
	Error  string
	// Profile is the measured window's CPU profile (--profile), nil when
	// not profiling or, with ProfileMissing saying why, when no window was
	// sampled.
	Profile        *profile.Profile
	ProfileMissing string
}

// Options wires the runner to its collaborators.
type Options struct {
	Labs     LabProvider
	Measurer Measurer
	Sink     Sink
	// Progress receives progress output; a terminal gets a redrawn bar,
	// anything else one line per step.
	Progress   io.Writer
	IsTerminal bool
	// TeardownTimeout bounds lab teardown after the run (default 2 minutes).
	TeardownTimeout time.Duration
	// Profiler, when set, samples every CPU during each step's measured
	// window (--profile); nil changes nothing about the run.
	Profiler Profiler
	// ProfileArms limits profiling to these arms (nil: every arm), so one
	// interleaved run can measure the profiler's own overhead.
	ProfileArms map[string]bool
	// Wakeup puts a wake-up policy in force around each step (see
	// pkg/wakeup); nil leaves the machine as it is and records "none".
	Wakeup WakeupController
	// Disturb, when set, stamps every step with what else ran (pkg/disturb).
	Disturb Stamper
	// RetakeDisturbed measures every disturbed step once more after the
	// planned rounds; both samples are stored, the retake names the
	// original (result.Conditions.RetakeOf) and the report leaves the
	// original out of the statistics, listed.
	RetakeDisturbed bool
}

// Stamper stamps a step with what else ran on the machine: Start is called
// before the step and the function it returns after it (pkg/disturb's Meter
// in production).
type Stamper interface {
	Start() (end func() *result.Disturbance)
}

// WakeupController starts wake-up policies (pkg/wakeup in production; tests
// use a fake).
type WakeupController interface {
	Start(p wakeup.Policy) (release func() error, err error)
}

// ErrInterrupted is returned when the run's context was cancelled; the run is
// stored as incomplete.
var ErrInterrupted = errors.New("run interrupted; finished samples are stored and the run is marked incomplete")

// StepsFailedError is returned by Execute when the run finished but some of
// its steps gave no result (a lab the kernel cannot build, a tool that
// failed): what was measured is stored, and the caller exits non-zero so a
// script or CI never mistakes the run for a clean one.
type StepsFailedError struct{ Failed, Total int }

func (e *StepsFailedError) Error() string {
	return fmt.Sprintf("%d of %d steps failed (their reasons are in the report)", e.Failed, e.Total)
}

// TeardownError is returned by Execute when the run was measured and stored
// but a lab could not be removed: the results stand, and the caller still
// reports them, then says what was left behind and exits non-zero.
type TeardownError struct{ Err error }

func (e *TeardownError) Error() string {
	return fmt.Sprintf("teardown failed, something was left on this host: %v; run `cnibench lab clean`", e.Err)
}

func (e *TeardownError) Unwrap() error { return e.Err }

// Execute runs the experiment and returns the stored run id. Labs are built
// once, before the first step, and all stay up for the whole run so steps can
// be interleaved; they are removed on every path out, with a fresh context
// when ctx was cancelled.
func Execute(ctx context.Context, e *Experiment, o Options) (runID int64, err error) {
	if o.TeardownTimeout == 0 {
		o.TeardownTimeout = 2 * time.Minute
	}
	runID, err = o.Sink.Begin(e)
	if err != nil {
		return 0, fmt.Errorf("store run: %w", err)
	}
	prog := newProgress(o.Progress, o.IsTerminal)

	labs := map[string]LabInstance{}
	labErr := map[string]error{}
	exclusive := map[string]bool{}
	paths := map[int]*result.PathMTU{}
	defer func() {
		tctx, cancel := context.WithTimeout(context.Background(), o.TeardownTimeout)
		defer cancel()
		var left []error
		for key, l := range labs {
			if derr := l.Down(tctx); derr != nil {
				prog.logf("lab %s (%s): teardown failed: %v", l.Name(), key, derr)
				left = append(left, fmt.Errorf("lab %s: %w", l.Name(), derr))
			}
		}
		if len(left) > 0 {
			// The run's own outcome (interrupted, failed steps) comes
			// first; a clean run becomes a TeardownError, which callers
			// report after the results.
			terr := &TeardownError{Err: errors.Join(left...)}
			if err == nil {
				err = terr
			} else {
				err = errors.Join(err, terr)
			}
		}
	}()

	for i := range e.Arms {
		a := &e.Arms[i]
		key := a.LabKey()
		if key == "" {
			continue
		}
		if _, done := labs[key]; done {
			continue
		}
		if _, failed := labErr[key]; failed {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		l, uerr := upLab(ctx, o.Labs, a)
		if uerr != nil {
			labErr[key] = uerr
			prog.logf("arm %s: lab %s: %v", a.Name, a.Topology, uerr)
			continue
		}
		prog.logf("lab %s up (%s) in %v", l.Name(), key, time.Since(start).Round(time.Millisecond))
		probePaths(ctx, e, key, l, paths, prog)
		if l.ChangesHost() {
			// Built once to check it works; from now on it is up only
			// during its own steps (see measure).
			exclusive[key] = true
			if derr := l.Down(ctx); derr != nil {
				labErr[key] = fmt.Errorf("teardown after probe: %w", derr)
			}
			prog.logf("lab %s changes host settings: it will be built for each of its steps only", l.Name())
			continue
		}
		labs[key] = l
	}

	steps := e.Plan()
	x := &executor{e: e, o: o, ctx: ctx, runID: runID, prog: prog, labs: labs, labErr: labErr, exclusive: exclusive,
		values: map[cellKey][]float64{}, cond: &conditions{}, paths: paths}
	if ctx.Err() == nil {
		if x.cond.idle = x.probeIdleWakeup(); x.cond.idle != nil {
			prog.logf("%s", idleWakeupText(x.cond.idle))
		}
	}
	var budget time.Duration
	if e.Precision > 0 {
		budget = time.Duration(e.Budget)
	}
	prog.start(len(steps), e.stepTime(), budget)
	start := time.Now()
	if err := x.run(steps); err != nil {
		return runID, err
	}
	planned := len(steps)
	n, err := x.retakeDisturbed(start)
	planned += n
	if err != nil {
		return runID, err
	}
	var prec *precisionOutcome
	if e.Precision > 0 && x.done == planned && ctx.Err() == nil {
		var err error
		if prec, err = x.refine(start); err != nil {
			return runID, err
		}
		planned = x.done + prec.interrupted
	}
	prog.finish(x.done)

	complete := x.done == planned && ctx.Err() == nil
	status := "complete"
	switch {
	case !complete:
		status = fmt.Sprintf("interrupted after %d of %d steps", x.done, planned)
	case x.failures > 0:
		status = fmt.Sprintf("complete; %d of %d steps failed", x.failures, x.done)
	}
	if prec != nil {
		status += "; " + prec.String()
	}
	if x.notRetaken > 0 {
		status += fmt.Sprintf("; %d disturbed steps not retaken: the budget was spent", x.notRetaken)
	}
	if x.notRetakenBusy > 0 {
		status += fmt.Sprintf("; %d disturbed steps not retaken: most of their round was disturbed, so the machine was, not the step", x.notRetakenBusy)
	}
	if eerr := o.Sink.End(runID, complete, status); eerr != nil && err == nil {
		err = fmt.Errorf("store run end: %w", eerr)
	}
	if !complete {
		return runID, ErrInterrupted
	}
	if err == nil && x.failures > 0 {
		err = &StepsFailedError{Failed: x.failures, Total: x.done}
	}
	return runID, err
}

// executor runs steps against the labs Execute built and keeps what the
// precision rule needs: every finished cell's primary values.
type executor struct {
	e              *Experiment
	o              Options
	ctx            context.Context
	runID          int64
	prog           *progress
	labs           map[string]LabInstance
	labErr         map[string]error
	exclusive      map[string]bool
	done, failures int
	values         map[cellKey][]float64
	cond           *conditions
	// paths is each arm's path as probed when its lab came up (by arm
	// index); absent for arms without a lab or a lab that cannot probe.
	paths map[int]*result.PathMTU
	// disturbed lists the steps whose sample was disturbed and will be
	// taken again (--retake-disturbed), with the value each would have
	// given the precision rule.
	disturbed []pendingRetake
	// notRetaken counts disturbed steps the budget left no time to retake,
	// notRetakenBusy those of rounds disturbed throughout; sinceRetake the
	// steps run since the last retakes.
	notRetaken, notRetakenBusy, sinceRetake int
}

// cellKey is one table cell: an arm, a test, a message size.
type cellKey struct {
	arm  int
	test string
	size int
}

// run measures steps in order, storing each; it stops early (without an
// error) when the context is cancelled.
func (x *executor) run(steps []Step) error {
	for _, st := range steps {
		if x.ctx.Err() != nil {
			return nil
		}
		a := &x.e.Arms[st.Arm]
		s := Sample{Step: st, Arm: a}
		res, merr := x.measureStep(a, st, &s)
		if merr != nil {
			if x.ctx.Err() != nil {
				return nil // an interrupted step is not a result
			}
			s.Error = merr.Error()
			x.failures++
		} else {
			s.Result = res
			v, ok := result.PrimaryMetric(st.Test).Get(res)
			if c := res.Conditions; c != nil && c.Disturbance != nil && c.Disturbance.Disturbed && st.RetakeOf == nil && x.o.RetakeDisturbed {
				// Measured again after this round; the retake's value
				// stands in for this one in the precision rule.
				x.disturbed = append(x.disturbed, pendingRetake{st, v, ok})
			} else if ok {
				k := cellKey{st.Arm, st.Test, st.MsgSize}
				x.values[k] = append(x.values[k], v)
			}
		}
		if serr := x.o.Sink.Sample(x.runID, s); serr != nil {
			return fmt.Errorf("store sample: %w", serr)
		}
		if st.RetakeOf == nil {
			x.sinceRetake++
		}
		x.done++
		x.prog.step(x.done, a.Name, st, res, merr)
	}
	return nil
}

// stepTime estimates one step's wall time for the ETA before any step ran.
func (e *Experiment) stepTime() time.Duration {
	return time.Duration(e.Duration) + time.Duration(e.Warmup) + 200*time.Millisecond
}

func (e *Experiment) measure(ctx context.Context, o Options, a *Arm, st Step, pl Placement, labs map[string]LabInstance, labErr map[string]error, exclusive map[string]bool, s *Sample) (_ *result.Result, err error) {
	spec := driver.Spec{
		Test:      st.Test,
		MsgSize:   st.MsgSize,
		Duration:  time.Duration(e.Duration),
		Warmup:    time.Duration(e.Warmup),
		Parallel:  e.Parallel,
		RateBps:   e.RateBps,
		ClientCPU: pl.Client,
		ServerCPU: pl.Server,
	}
	req := MeasureRequest{Engine: a.Engine, StartServer: true}
	var li LabInstance // the arm's lab, if it has one
	if a.ServerAddress != "" {
		spec.Server = a.ServerAddress
		req.StartServer = false
	} else {
		key := a.LabKey()
		if lerr, failed := labErr[key]; failed {
			return nil, fmt.Errorf("lab %s: %w", a.Topology, lerr)
		}
		l := labs[key]
		if exclusive[key] {
			if l, err = upLab(ctx, o.Labs, a); err != nil {
				return nil, fmt.Errorf("lab %s: %w", a.Topology, err)
			}
			defer func() {
				tctx, cancel := context.WithTimeout(context.Background(), o.TeardownTimeout)
				defer cancel()
				if derr := l.Down(tctx); derr != nil && err == nil {
					err = fmt.Errorf("teardown lab %s: %w; run `cnibench lab clean`", l.Name(), derr)
				}
			}()
		}
		if l == nil {
			return nil, fmt.Errorf("lab %s was not built", a.Topology)
		}
		cns, _, err := l.Endpoint(a.Client)
		if err != nil {
			return nil, err
		}
		sns, sip, err := l.Endpoint(a.Server)
		if err != nil {
			return nil, err
		}
		req.ClientNetns, req.ServerNetns, spec.Server = cns, sns, sip
		li = l
	}
	req.Spec = spec
	meas := o.Measurer
	if dl, ok := li.(DatapathLab); ok {
		if dm := dl.DatapathMeter(); dm != nil {
			meas = meteredMeasurer{inner: meas, m: dm}
		}
	}
	mctx := ctx
	var health func() error
	if hl, ok := li.(HealthLab); ok {
		mctx, health = watchHealth(ctx, hl)
	}
	var res *result.Result
	var merr error
	if o.Profiler != nil && (o.ProfileArms == nil || o.ProfileArms[a.Name]) {
		var prof *profile.Profile
		var why string
		res, prof, why, merr = measureProfiled(mctx, meas, req, o.Profiler)
		if prof != nil {
			// Every repeat of a cell shares the cell's bound.
			profile.Bound(prof.Stacks, profile.MaxCellBytes/max(e.Repeats, 1))
		}
		s.Profile, s.ProfileMissing = prof, why
	} else {
		res, merr = meas.Measure(mctx, req)
	}
	if health != nil {
		if herr := health(); herr != nil && ctx.Err() == nil {
			return nil, &DatapathFailedError{Lab: li.Name(), Err: herr}
		}
	}
	if merr == nil && res != nil {
		if what := movedNothing(res); what != "" {
			return nil, &NoTrafficError{What: what}
		}
	}
	return res, merr
}
