package experiment

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
)

// progress prints a redrawn bar on a terminal and one plain line per step
// otherwise (logs, CI), so long runs are never silent. It tells the truth
// in every phase: the planned rounds count their steps against a total
// known in advance, with an ETA; a precision round or a batch of retakes,
// whose number nobody knows in advance, counts its own steps and shows
// the budget left instead of an ETA that would read 0s for minutes.
type progress struct {
	w        io.Writer
	tty      bool
	total    int // steps planned so far, all phases
	began    time.Time
	estimate time.Duration
	drawn    bool
	// phase is "" for the planned rounds, else the label of the current
	// precision round or retake batch; phaseStart is x.done when it began
	// and phaseSteps its size. deadline is when the budget runs out (zero
	// without one).
	phase                 string
	phaseStart, phaseSize int
	deadline              time.Time
}

func newProgress(w io.Writer, tty bool) *progress {
	if w == nil {
		w = io.Discard
	}
	return &progress{w: w, tty: tty}
}

func (p *progress) logf(format string, args ...any) {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

// start begins the planned rounds. budget, when set, is the precision
// budget that bounds the whole run, counted from now.
func (p *progress) start(total int, perStep, budget time.Duration) {
	p.total, p.began, p.estimate = total, time.Now(), perStep
	planned := (time.Duration(total) * perStep).Round(time.Second)
	if budget > 0 {
		p.deadline = p.began.Add(budget)
		p.logf("%d planned steps, about %v; then precision rounds for the cells not yet precise enough, within a %v budget",
			total, planned, budget)
		return
	}
	p.logf("%d steps, about %v", total, planned)
}

// beginPhase starts a precision round or a batch of retakes of n steps
// after done steps, and says why it runs.
func (p *progress) beginPhase(label string, done, n int, why string) {
	p.phase, p.phaseStart, p.phaseSize = label, done, n
	p.total += n
	left := ""
	if !p.deadline.IsZero() {
		left = fmt.Sprintf("; budget left %v", p.budgetLeft())
	}
	p.logf("%s: %d steps — %s%s", label, n, why, left)
}

func (p *progress) budgetLeft() time.Duration {
	return max(0, time.Until(p.deadline)).Round(time.Second)
}

func (p *progress) eta(done int) time.Duration {
	if done == 0 {
		return time.Duration(p.total) * p.estimate
	}
	per := time.Since(p.began) / time.Duration(done)
	return (time.Duration(p.total-done) * per).Round(time.Second)
}

// counter is the step's place in its phase and what is left: an ETA in
// the planned rounds, the budget in a precision round.
func (p *progress) counter(done int) (where, left string) {
	if p.phase == "" {
		return fmt.Sprintf("%d/%d", done, p.total), fmt.Sprintf("ETA %v", p.eta(done))
	}
	where = fmt.Sprintf("%s %d/%d", p.phase, done-p.phaseStart, p.phaseSize)
	if p.deadline.IsZero() {
		return where, fmt.Sprintf("step %d", done)
	}
	return where, fmt.Sprintf("budget left %v", p.budgetLeft())
}

func (p *progress) step(done int, arm string, st Step, r *result.Result, err error) {
	what := "ok"
	switch {
	case err != nil:
		what = "FAILED: " + err.Error()
	case r != nil:
		m := result.PrimaryMetric(st.Test)
		if v, ok := m.Get(r); ok {
			what = fmt.Sprintf("%.4g %s", v, m.Unit)
		} else {
			what = "no " + m.Name
		}
	}
	where, left := p.counter(done)
	if !p.tty {
		fmt.Fprintf(p.w, "[%s] %s %s %dB #%d: %s (%s)\n", where, arm, st.Test, st.MsgSize, st.Repeat+1, what, left)
		return
	}
	if err != nil {
		p.logf("%s %s %dB #%d: %s", arm, st.Test, st.MsgSize, st.Repeat+1, what)
	}
	const width = 30
	fill := width * done / max(p.total, 1)
	if p.phase != "" {
		fill = width * (done - p.phaseStart) / max(p.phaseSize, 1)
	}
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %s %s %s %s %s", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		where, arm, st.Test, what, left)
	p.drawn = true
}

func (p *progress) finish(done int) {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
	p.logf("finished %d of %d steps in %v", done, p.total, time.Since(p.began).Round(time.Second))
}
