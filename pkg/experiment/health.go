package experiment

import (
	"context"
	"fmt"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
)

// A datapath that crashes or stalls during a step is a measured fact, not
// a hang and not a silently bad sample: the step becomes an error naming
// what failed, the lab is rebuilt for the arm's next steps (or, when it
// cannot be, the arm stops), and the run goes on.

// HealthLab is implemented by lab instances whose datapath runs in daemons
// that can die or stop on their own (the OVN labs' ovs-vswitchds,
// ovn-controllers and databases). Health returns nil while all serve and
// an error naming the first that does not.
type HealthLab interface {
	Health() error
}

// DatapathFailedError is a step during which the lab's datapath failed:
// Err names the daemon and the last error of its log.
type DatapathFailedError struct {
	Lab string
	Err error
}

func (e *DatapathFailedError) Error() string {
	return fmt.Sprintf("the datapath of lab %s failed during the step: %v", e.Lab, e.Err)
}

func (e *DatapathFailedError) Unwrap() error { return e.Err }

// NoTrafficError is a step whose measured window moved nothing: not a
// measurement of the datapath, whatever its figures would say.
type NoTrafficError struct{ What string }

func (e *NoTrafficError) Error() string {
	return "the step moved no traffic in its whole measured window (" + e.What + ")"
}

// healthEvery is how often a step's lab is checked while it is measured.
var healthEvery = 100 * time.Millisecond

// watchHealth checks hl every healthEvery until stop is called; a failure
// cancels the returned context (ending the measurement at once instead of
// at its tools' time-outs) and is what stop returns. stop also checks once
// more, for a failure since the last tick.
func watchHealth(ctx context.Context, hl HealthLab) (context.Context, func() error) {
	cctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	finished := make(chan error, 1)
	go func() {
		tick := time.NewTicker(healthEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				finished <- nil
				return
			case <-tick.C:
				if err := hl.Health(); err != nil {
					cancel(err)
					finished <- err
					return
				}
			}
		}
	}()
	return cctx, func() error {
		close(done)
		err := <-finished
		cancel(nil)
		if err == nil {
			err = hl.Health()
		}
		return err
	}
}

// movedNothing says what shows that a result moved no traffic, "" when it
// moved some or when it does not say (a tool that reports neither
// transactions nor bytes).
func movedNothing(r *result.Result) string {
	known := false
	if t := r.Transactions; t != nil {
		if t.Count > 0 {
			return ""
		}
		known = true
	}
	if tp := r.Throughput; tp != nil {
		for _, v := range []*float64{tp.ReceiverBps, tp.SenderBps} {
			if v != nil {
				if *v > 0 {
					return ""
				}
				known = true
			}
		}
		for _, v := range []*int64{tp.BytesReceived, tp.BytesSent} {
			if v != nil {
				if *v > 0 {
					return ""
				}
				known = true
			}
		}
	}
	if !known {
		return ""
	}
	if u := r.UDP; u != nil && u.Sent > 0 {
		return fmt.Sprintf("%d datagrams sent, none received", u.Sent)
	}
	return "no transaction completed and no byte was received"
}

// rebuild replaces an arm's lab whose datapath failed during a step with
// a new one for the arm's next steps; when that fails too, the arm stops
// (its next steps fail at once, naming why). A lab built for each step
// (one that changes the host) needs nothing: the next step builds anew.
func (x *executor) rebuild(a *Arm, failed *DatapathFailedError) {
	key := a.LabKey()
	old, ok := x.labs[key]
	if !ok || x.exclusive[key] {
		return
	}
	delete(x.labs, key)
	tctx, cancel := context.WithTimeout(context.Background(), x.o.TeardownTimeout)
	derr := old.Down(tctx)
	cancel()
	if derr != nil {
		// Kept for the run's final teardown, which retries and reports it.
		x.labs[key+" (broken "+old.Name()+")"] = old
		x.prog.logf("lab %s: teardown after its datapath failed: %v", old.Name(), derr)
	}
	l, uerr := upLab(x.ctx, x.o.Labs, a)
	if uerr != nil {
		x.labErr[key] = fmt.Errorf("its datapath failed (%v) and rebuilding it failed: %w", failed.Err, uerr)
		x.prog.logf("arm %s: lab %s failed and could not be rebuilt, the arm stops: %v", a.Name, old.Name(), uerr)
		return
	}
	x.labs[key] = l
	x.prog.logf("arm %s: lab %s failed during a step (%v); rebuilt as %s", a.Name, old.Name(), failed.Err, l.Name())
}
