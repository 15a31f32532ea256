package experiment

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
)

// progress prints a redrawn bar with an ETA on a terminal and one plain line
// per step otherwise (logs, CI), so long runs are never silent.
type progress struct {
	w        io.Writer
	tty      bool
	total    int
	began    time.Time
	estimate time.Duration
	drawn    bool
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

func (p *progress) start(total int, perStep time.Duration) {
	p.total, p.began, p.estimate = total, time.Now(), perStep
	p.logf("%d steps, about %v", total, (time.Duration(total) * perStep).Round(time.Second))
}

func (p *progress) eta(done int) time.Duration {
	if done == 0 {
		return time.Duration(p.total) * p.estimate
	}
	per := time.Since(p.began) / time.Duration(done)
	return (time.Duration(p.total-done) * per).Round(time.Second)
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
	if !p.tty {
		fmt.Fprintf(p.w, "[%d/%d] %s %s %dB #%d: %s (ETA %v)\n", done, p.total, arm, st.Test, st.MsgSize, st.Repeat+1, what, p.eta(done))
		return
	}
	if err != nil {
		p.logf("%s %s %dB #%d: %s", arm, st.Test, st.MsgSize, st.Repeat+1, what)
	}
	const width = 30
	fill := width * done / max(p.total, 1)
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %d/%d %s %s %s ETA %v", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		done, p.total, arm, st.Test, what, p.eta(done))
	p.drawn = true
}

func (p *progress) finish(done int) {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
	p.logf("finished %d of %d steps in %v", done, p.total, time.Since(p.began).Round(time.Second))
}
