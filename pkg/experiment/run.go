package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/result"
)

// LabProvider builds lab topologies. The production implementation wraps
// pkg/lab; tests use a fake.
type LabProvider interface {
	Up(ctx context.Context, topology, dir string, knobs map[string]string) (LabInstance, error)
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
	defer func() {
		tctx, cancel := context.WithTimeout(context.Background(), o.TeardownTimeout)
		defer cancel()
		for key, l := range labs {
			if derr := l.Down(tctx); derr != nil {
				prog.logf("lab %s (%s): teardown failed: %v; run `cnibench lab clean`", l.Name(), key, derr)
				if err == nil {
					err = fmt.Errorf("teardown lab %s: %w", l.Name(), derr)
				}
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
		l, uerr := o.Labs.Up(ctx, a.Topology, e.Dir, a.Knobs)
		if uerr != nil {
			labErr[key] = uerr
			prog.logf("arm %s: lab %s: %v", a.Name, a.Topology, uerr)
			continue
		}
		prog.logf("lab %s up (%s) in %v", l.Name(), key, time.Since(start).Round(time.Millisecond))
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
	prog.start(len(steps), e.stepTime())
	failures := 0
	done := 0
	for _, st := range steps {
		if ctx.Err() != nil {
			break
		}
		a := &e.Arms[st.Arm]
		s := Sample{Step: st, Arm: a}
		res, merr := e.measure(ctx, o, a, st, labs, labErr, exclusive)
		if merr != nil {
			if ctx.Err() != nil {
				break // an interrupted step is not a result
			}
			s.Error = merr.Error()
			failures++
		} else {
			s.Result = res
		}
		if serr := o.Sink.Sample(runID, s); serr != nil {
			return runID, fmt.Errorf("store sample: %w", serr)
		}
		done++
		prog.step(done, a.Name, st, res, merr)
	}
	prog.finish(done)

	complete := done == len(steps)
	status := "complete"
	switch {
	case !complete:
		status = fmt.Sprintf("interrupted after %d of %d steps", done, len(steps))
	case failures > 0:
		status = fmt.Sprintf("complete; %d of %d steps failed", failures, len(steps))
	}
	if eerr := o.Sink.End(runID, complete, status); eerr != nil && err == nil {
		err = fmt.Errorf("store run end: %w", eerr)
	}
	if !complete {
		return runID, ErrInterrupted
	}
	if err == nil && failures > 0 {
		err = &StepsFailedError{Failed: failures, Total: len(steps)}
	}
	return runID, err
}

// stepTime estimates one step's wall time for the ETA before any step ran.
func (e *Experiment) stepTime() time.Duration {
	return time.Duration(e.Duration) + time.Duration(e.Warmup) + 200*time.Millisecond
}

func (e *Experiment) measure(ctx context.Context, o Options, a *Arm, st Step, labs map[string]LabInstance, labErr map[string]error, exclusive map[string]bool) (_ *result.Result, err error) {
	spec := driver.Spec{
		Test:     st.Test,
		MsgSize:  st.MsgSize,
		Duration: time.Duration(e.Duration),
		Warmup:   time.Duration(e.Warmup),
		Parallel: e.Parallel,
		RateBps:  e.RateBps,
	}
	req := MeasureRequest{Engine: a.Engine, StartServer: true}
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
			if l, err = o.Labs.Up(ctx, a.Topology, e.Dir, a.Knobs); err != nil {
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
	}
	req.Spec = spec
	return o.Measurer.Measure(ctx, req)
}
