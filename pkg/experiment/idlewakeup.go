package experiment

import (
	"fmt"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/wakeup"
)

// The host's idle wake-up penalty, measured once per run.
//
// A request/response message wakes a thread blocked on another CPU; if that
// CPU went idle and halted, waking it can cost more than the datapath (25 µs
// on the reference VM under the haltpoll cpuidle driver, against a 2–5 µs
// veth). Request/response tests are therefore measured with idle states
// held off (wakeup.ForTest), and what that hides is measured here, on the
// run's own baseline path rather than a pipe: the same tcp_lat 1 B step with
// idle CPUs free to halt and with them held awake, alternated so drift
// falls on both alike. It is a property of the host, reported once in the
// report's header and stored with every sample.

// idleProbeRounds alternations of idleProbeDuration per policy: about 3 s.
const (
	idleProbeRounds   = 3
	idleProbeDuration = 300 * time.Millisecond
	idleProbeWarmup   = 100 * time.Millisecond
)

// probeIdleWakeup measures the penalty on the baseline arm, or returns nil
// when nothing in the run would use it (no wake-up control, no
// request/response test).
func (x *executor) probeIdleWakeup() *result.IdleWakeup {
	e := x.e
	if x.o.Wakeup == nil || !e.hasRequestResponse() || len(e.Arms) == 0 {
		return nil
	}
	a := e.baselineArm()
	out := &result.IdleWakeup{Arm: a.Name, Rounds: idleProbeRounds}
	probe := *e
	probe.Duration, probe.Warmup = Duration(idleProbeDuration), Duration(idleProbeWarmup)
	arm := *a
	arm.Engine = DefaultEngine // the one engine that runs tcp_lat everywhere
	o := x.o
	o.Profiler = nil
	st := Step{Test: result.TCPLat, MsgSize: 1}
	pl := e.armPlacement(a)
	var none, hold []float64
	for r := 0; r < idleProbeRounds && x.ctx.Err() == nil; r++ {
		for _, p := range []wakeup.Policy{wakeup.None, wakeup.Hold} {
			v, err := x.probeOnce(&probe, o, &arm, st, pl, p)
			if err != nil {
				out.Missing = fmt.Sprintf("the probe failed under %s: %v", p, err)
				return out
			}
			if p == wakeup.None {
				none = append(none, v)
			} else {
				hold = append(hold, v)
			}
		}
	}
	if len(none) == 0 || len(hold) == 0 {
		out.Missing = "interrupted before the probe finished"
		return out
	}
	out.NoneUs, out.HoldUs = stats.Median(none), stats.Median(hold)
	out.PenaltyUs = out.NoneUs - out.HoldUs
	return out
}

// probeOnce measures one tcp_lat step under policy p and returns its
// one-way time in µs.
func (x *executor) probeOnce(e *Experiment, o Options, a *Arm, st Step, pl Placement, p wakeup.Policy) (float64, error) {
	if p != wakeup.None {
		release, err := o.Wakeup.Start(p)
		if err != nil {
			return 0, err
		}
		defer release()
	}
	var s Sample
	res, err := e.measure(x.ctx, o, a, st, pl, x.labs, x.labErr, x.exclusive, &s)
	if err != nil {
		return 0, err
	}
	m := result.PrimaryMetric(st.Test)
	v, ok := m.Get(res)
	if !ok {
		return 0, fmt.Errorf("no %s in the result", m.Name)
	}
	return v, nil
}

// hasRequestResponse reports whether any test of the run is a
// request/response test, the kind the penalty concerns.
func (e *Experiment) hasRequestResponse() bool {
	for _, t := range e.Tests {
		if requestResponse(t) {
			return true
		}
	}
	return false
}

// baselineArm is the arm the report compares the others with: the named
// baseline, or the first arm.
func (e *Experiment) baselineArm() *Arm {
	for i := range e.Arms {
		if e.Arms[i].Name == e.Baseline {
			return &e.Arms[i]
		}
	}
	return &e.Arms[0]
}

// idleWakeupText is the penalty as the progress log says it.
func idleWakeupText(w *result.IdleWakeup) string {
	if w.Missing != "" {
		return "idle wake-up penalty not measured: " + w.Missing
	}
	return fmt.Sprintf("idle wake-up penalty %+.1f µs per message one way (tcp_lat 1 B on %s, %d alternations: "+
		"idle CPUs free to halt %.1f µs, held awake %.1f µs); request/response tests run held awake",
		w.PenaltyUs, w.Arm, w.Rounds, w.NoneUs, w.HoldUs)
}
