package experiment

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/wakeup"
)

// Conditions of measuring: the wake-up policy, where the client and server
// run, and the stamp of what else ran (see pkg/wakeup, pkg/disturb). An
// experiment sets them for every arm (`wakeup:`, `cpus:`); an arm may
// override them, so one interleaved run can show what a policy changes.

// Placement pins the client and the server to CPUs. Nil fields are not
// pinned.
type Placement struct {
	Client, Server *int
}

// String is the placement as written in a file.
func (p Placement) String() string {
	if p.Client == nil && p.Server == nil {
		return "none"
	}
	var parts []string
	if p.Client != nil {
		parts = append(parts, "client="+strconv.Itoa(*p.Client))
	}
	if p.Server != nil {
		parts = append(parts, "server="+strconv.Itoa(*p.Server))
	}
	return strings.Join(parts, ",")
}

// ErrNoSuchCPU is wrapped when a placement names a CPU this host lacks.
var ErrNoSuchCPU = errors.New("no such CPU")

// DefaultPlacement is what `cpus: auto` (and no cpus at all) means: the
// client on the second-to-last CPU and the server on the last, as two
// hosts each have their own, so every message crosses CPUs the same way in
// every sample. Left unpinned, the scheduler sometimes puts both on one CPU
// (no cross-CPU wake-up at all) and sometimes not, and a latency cell's
// samples split into two modes ~2× apart; pinned to one CPU, a stream's
// sender and receiver share it. Chosen by measurement on the reference VM
// (docs/reports.md, "CPU placement"). With one CPU nothing is pinned.
func DefaultPlacement(ncpu int) Placement {
	if ncpu < 2 {
		return Placement{}
	}
	c, s := ncpu-2, ncpu-1
	return Placement{Client: &c, Server: &s}
}

// ParsePlacement reads `none`, `auto`, or `client=N,server=M` (either may be
// left out). ncpu is the number of CPUs this process may use; a CPU outside
// it is an error, since pinning to it would fail in every step.
func ParsePlacement(s string, ncpu int) (Placement, error) {
	s = strings.TrimSpace(s)
	var p Placement
	switch s {
	case "", "auto":
		return DefaultPlacement(ncpu), nil
	case "none":
		return p, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if !ok || err != nil || n < 0 {
			return p, fmt.Errorf("cpus %q: want auto, none or client=N,server=M with N, M CPU numbers", s)
		}
		if n >= ncpu {
			return p, fmt.Errorf("cpus %q: CPU %d does not exist here (CPUs 0-%d): %w", s, n, ncpu-1, ErrNoSuchCPU)
		}
		switch strings.TrimSpace(k) {
		case "client":
			p.Client = &n
		case "server":
			p.Server = &n
		default:
			return p, fmt.Errorf("cpus %q: %q is neither client nor server", s, k)
		}
	}
	return p, nil
}

// usableCPUs is how many CPUs a placement may name.
func usableCPUs() int { return runtime.NumCPU() }

// armWakeup is the arm's policy as written (arm over experiment).
func (e *Experiment) armWakeup(a *Arm) string {
	if a.Wakeup != "" {
		return a.Wakeup
	}
	return e.Wakeup
}

// armPlacement is the arm's placement (arm over experiment); Check has
// already validated both.
func (e *Experiment) armPlacement(a *Arm) Placement {
	s := e.CPUs
	if a.CPUs != "" {
		s = a.CPUs
	}
	p, _ := ParsePlacement(s, usableCPUs())
	return p
}

// checkConditions validates the wake-up and CPU fields of the experiment and
// its arms.
func (e *Experiment) checkConditions() error {
	if _, err := wakeup.Parse(e.Wakeup); err != nil {
		return fmt.Errorf("wakeup: %w", err)
	}
	if _, err := ParsePlacement(e.CPUs, usableCPUs()); err != nil {
		return err
	}
	for i := range e.Arms {
		a := &e.Arms[i]
		if a.Wakeup != "" {
			if _, err := wakeup.Parse(a.Wakeup); err != nil {
				return fmt.Errorf("arm %s (line %d): wakeup: %w", a.Name, a.line, err)
			}
		}
		if a.CPUs != "" {
			if _, err := ParsePlacement(a.CPUs, usableCPUs()); err != nil {
				return fmt.Errorf("arm %s (line %d): %w", a.Name, a.line, err)
			}
		}
	}
	return nil
}

// conditions holds what Execute measured once for the run.
type conditions struct {
	// idle is the host's idle wake-up penalty (probeIdleWakeup), nil
	// when it was not measured.
	idle *result.IdleWakeup
}

// stamp records the conditions of one step in its result.
func stamp(res *result.Result, p wakeup.Policy, why string, idle *result.IdleWakeup, pl Placement, d *result.Disturbance) {
	if res == nil {
		return
	}
	res.Conditions = &result.Conditions{Wakeup: string(p), WakeupWhy: why, IdleWakeup: idle,
		ClientCPU: pl.Client, ServerCPU: pl.Server, Disturbance: d}
	if idle != nil && idle.Missing == "" {
		v := idle.PenaltyUs
		res.Conditions.IdleWakeupUs = &v
	}
}

// requestResponse reports whether test waits for a reply to every message,
// so that waking the blocked receiver is part of what it measures.
func requestResponse(test string) bool {
	p, _ := wakeup.ForTest(wakeup.Auto, test)
	return p == wakeup.Hold
}

// measureStep measures one step under its arm's wake-up policy and CPU
// placement and stamps the result with them and with what else ran.
func (x *executor) measureStep(a *Arm, st Step, s *Sample) (*result.Result, error) {
	written, _ := wakeup.Parse(x.e.armWakeup(a))
	pol, why := wakeup.ForTest(written, st.Test)
	pl := x.e.armPlacement(a)
	if x.o.Wakeup == nil {
		pol, why = wakeup.None, "no wake-up control"
	} else if pol != wakeup.None {
		release, err := x.o.Wakeup.Start(pol)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	var end func() *result.Disturbance
	if x.o.Disturb != nil {
		end = x.o.Disturb.Start()
	}
	res, err := x.e.measure(x.ctx, x.o, a, st, pl, x.labs, x.labErr, x.exclusive, s)
	if dfe := (*DatapathFailedError)(nil); errors.As(err, &dfe) {
		x.rebuild(a, dfe)
	}
	if err != nil {
		return nil, err
	}
	var d *result.Disturbance
	if end != nil {
		d = end()
	}
	stamp(res, pol, why, x.cond.idle, pl, d)
	res.PathMTU = x.paths[st.Arm]
	if st.RetakeOf != nil {
		seq := *st.RetakeOf
		res.Conditions.RetakeOf = &seq
	}
	return res, nil
}

// pendingRetake is a disturbed step waiting to be measured again, and the
// value it gave.
type pendingRetake struct {
	step  Step
	value float64
	ok    bool
}

// retakeDisturbed measures the steps disturbed since the last call once
// more, numbered after the last step, and returns how many it ran. In a
// precision-driven run only as many as fit in what is left of the budget
// are retaken (at the pace measured so far); the others keep their sample,
// whose value then counts after all, and the run's status says how many.
// When more than half of the steps since the last call were disturbed,
// none is retaken: the disturbance is the machine's state (measured here:
// 117 of 120 steps while another session loaded 10,000 Services into a
// Kubernetes cluster), and the budget is better spent on more rounds.
func (x *executor) retakeDisturbed(start time.Time) (int, error) {
	if !x.o.RetakeDisturbed || x.ctx.Err() != nil || len(x.disturbed) == 0 {
		return 0, nil
	}
	pend := x.disturbed
	x.disturbed = nil
	batch := x.sinceRetake
	x.sinceRetake = 0
	fit := len(pend)
	if 2*len(pend) > batch {
		// Most of the round was disturbed: that is the machine's state,
		// not a passing event, and a retake would be disturbed too. The
		// samples stand (flagged), and the budget goes to more rounds.
		fit = 0
		x.notRetakenBusy += len(pend)
	}
	if x.e.Precision > 0 && x.done > 0 {
		per := time.Since(start) / time.Duration(x.done)
		left := time.Duration(x.e.Budget) - time.Since(start)
		fit = max(0, min(fit, int(left/max(per, 1))))
	}
	for _, p := range pend[fit:] {
		if p.ok {
			k := cellKey{p.step.Arm, p.step.Test, p.step.MsgSize}
			x.values[k] = append(x.values[k], p.value)
		}
	}
	if 2*len(pend) <= batch {
		x.notRetaken += len(pend) - fit
	}
	steps := make([]Step, 0, fit)
	for i, p := range pend[:fit] {
		st := p.step
		orig := st.Seq
		st.Seq = x.done + i
		st.RetakeOf = &orig
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		return 0, nil
	}
	x.prog.beginPhase("retakes", x.done, len(steps), "steps taken while other work disturbed the machine, measured again")
	return len(steps), x.run(steps)
}

// Controller is the production WakeupController: it holds
// /dev/cpu_dma_latency and runs the spinner from exe.
type Controller struct {
	Exe string
}

// Start implements WakeupController.
func (c Controller) Start(p wakeup.Policy) (func() error, error) {
	h, err := wakeup.Start(p, wakeup.Options{Exe: c.Exe})
	if err != nil {
		return nil, err
	}
	return h.Release, nil
}
