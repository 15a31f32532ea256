// Package verify proves a tuning profile on this host: it measures an
// experiment as it is ("before"), applies the profile — inside each lab the
// "after" run builds, and optionally on the host — measures again
// ("after"), and rolls every change back, on every path out (Ctrl-C
// included), unless asked to keep it. The two runs are stored so that
// report.Compare can judge them.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/tune"
)

// Options is one verification.
type Options struct {
	Experiment *experiment.Experiment
	Profile    tune.Profile
	Knobs      []*tune.Knob // the knobs to apply (tune.Select)
	// Host also applies the host-scope knobs (and, for the latency
	// profile, holds /dev/cpu_dma_latency) during the after run.
	Host       bool
	Keep       bool // leave the profile applied afterwards
	JournalDir string
	Env        *tune.Env // nil: the host's /proc, /sys, /dev

	DB          *store.DB
	Fingerprint result.Fingerprint
	// Out receives what was applied and rolled back; Progress the runs'
	// progress lines.
	Out, Progress io.Writer
	IsTerminal    bool
	// OnApply, if set, prints an apply report (the CLI's table).
	OnApply func(w io.Writer, rep *tune.ApplyReport)
	// Labs builds the labs; nil means experiment.Labs{}.
	Labs experiment.LabProvider
	// Measurer measures; nil means experiment.Drivers{}.
	Measurer experiment.Measurer
	// Disturb stamps both runs' steps with what else ran (pkg/disturb).
	// Both runs measure with no wake-up policy of their own, so the
	// latency profile's cpu_dma_latency hold is the difference measured.
	Disturb experiment.Stamper
}

// Result names the two stored runs.
type Result struct {
	Before, After int64
	// Changes counts the per-namespace writes made in the after run's labs.
	Changes int
}

// Verify verifies o.Profile on o.Experiment. A run whose steps failed (an arm
// this kernel cannot build) does not stop it: both runs are measured and
// stored, and the StepsFailedError is returned with the Result.
func Verify(ctx context.Context, o Options) (*Result, error) {
	if o.Env == nil {
		o.Env = tune.DefaultEnv()
	}
	if o.Labs == nil {
		o.Labs = experiment.Labs{}
	}
	if o.Measurer == nil {
		o.Measurer = experiment.Drivers{}
	}
	if o.OnApply == nil {
		o.OnApply = func(io.Writer, *tune.ApplyReport) {}
	}
	e := o.Experiment
	base := fmt.Sprintf("%s-%s-%s", e.Name, o.Profile, runid.New())
	var stepsFailed error
	execute := func(phase string, labs experiment.LabProvider) (int64, error) {
		x := *e
		x.Name = base + "-" + phase
		fmt.Fprintf(o.Progress, "%s: experiment %s, %d arms, %d steps\n", phase, e.Name, len(e.Arms), len(e.Plan()))
		id, err := experiment.Execute(ctx, &x, experiment.Options{
			Labs: labs, Measurer: o.Measurer,
			Sink:     experiment.StoreSink{DB: o.DB, Kind: store.KindTuneVerify, Host: o.Fingerprint},
			Progress: o.Progress, IsTerminal: o.IsTerminal,
			Disturb: o.Disturb,
		})
		if id != 0 {
			fmt.Fprintf(o.Progress, "%s: stored as run %d (%s)\n", phase, id, x.Name)
		}
		var sf *experiment.StepsFailedError
		if errors.As(err, &sf) {
			stepsFailed = fmt.Errorf("%s run: %w", phase, err)
			return id, nil
		}
		if err != nil {
			return id, fmt.Errorf("%s run: %w", phase, err)
		}
		return id, nil
	}
	res := &Result{}
	var err error
	if res.Before, err = execute("before", o.Labs); err != nil {
		return res, err
	}

	// From here on every path out rolls back what was applied, with a fresh
	// context so that Ctrl-C does not skip it.
	var journals []string
	var jmu sync.Mutex
	addJournal := func(j string) {
		jmu.Lock()
		journals = append(journals, j)
		jmu.Unlock()
	}
	defer func() {
		if o.Keep {
			if len(journals) > 0 {
				fmt.Fprintf(o.Out, "kept the profile (--keep); undo with `cnibench tune rollback --journal-dir %s`\n", o.JournalDir)
			}
			return
		}
		for i := len(journals) - 1; i >= 0; i-- {
			if _, rerr := tune.Rollback(o.Env, journals[i]); rerr != nil && !errors.Is(rerr, tune.ErrRolledBack) {
				fmt.Fprintf(o.Progress, "rollback %s: %v; run `cnibench tune rollback --journal %s`\n", journals[i], rerr, journals[i])
			}
		}
		if len(journals) > 0 {
			fmt.Fprintf(o.Out, "rolled back %d journals\n", len(journals))
		}
	}()

	if o.Host {
		var hostKs []*tune.Knob
		for _, k := range o.Knobs {
			if k.Scope != tune.ScopeNetns {
				hostKs = append(hostKs, k)
			}
		}
		// Per-namespace knobs in the host's namespace too: new namespaces
		// copy some of them (tcp_rmem, tcp_wmem, congestion control).
		hostKs = append(hostKs, netnsKnobs(o.Knobs)...)
		rep, err := tune.Apply(tune.ApplyOptions{Env: o.Env, Profile: o.Profile, Knobs: hostKs, ScopeLabel: "host (verify " + base + ")", JournalDir: o.JournalDir})
		if rep != nil && rep.Journal != "" {
			addJournal(rep.Journal)
		}
		if rep != nil {
			fmt.Fprintln(o.Out, "applied on the host:")
			o.OnApply(o.Out, rep)
		}
		if err != nil {
			return res, err
		}
		if k, _ := tune.Lookup("cpu.dma_latency"); selected(o.Knobs, k) {
			if rec, ok := k.Recs[o.Profile]; ok {
				var us int32
				fmt.Sscan(rec.Value, &us)
				release, herr := tune.HoldDMALatency(o.Env, us)
				if herr != nil {
					fmt.Fprintf(o.Out, "cpu.dma_latency: not held: %v\n", herr)
				} else {
					defer release()
					fmt.Fprintf(o.Out, "cpu.dma_latency: held at %d µs for the after run\n", us)
				}
			}
		}
	}

	labs := &tunedLabs{inner: o.Labs, env: o.Env, profile: o.Profile, knobs: netnsKnobs(o.Knobs), dir: o.JournalDir,
		label: "verify " + base, out: o.Out, add: addJournal, onApply: o.OnApply}
	if res.After, err = execute("after", labs); err != nil {
		return res, err
	}
	res.Changes = labs.changes
	if labs.changes == 0 && !o.Host {
		fmt.Fprintln(o.Out, "note: no per-namespace knob differed in the labs; before and after ran the same settings")
	}
	return res, stepsFailed
}

func netnsKnobs(ks []*tune.Knob) []*tune.Knob {
	var out []*tune.Knob
	for _, k := range ks {
		if k.Scope == tune.ScopeNetns {
			out = append(out, k)
		}
	}
	return out
}

func selected(ks []*tune.Knob, k *tune.Knob) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// tunedLabs builds labs like its inner provider and then applies the
// profile's per-namespace knobs inside each new lab's endpoint namespaces,
// journaled.
type tunedLabs struct {
	inner   experiment.LabProvider
	env     *tune.Env
	profile tune.Profile
	knobs   []*tune.Knob
	dir     string
	label   string
	out     io.Writer
	add     func(string)
	onApply func(io.Writer, *tune.ApplyReport)

	mu      sync.Mutex
	changes int
}

func (t *tunedLabs) Up(ctx context.Context, spec *lab.Spec) (experiment.LabInstance, error) {
	l, err := t.inner.Up(ctx, spec)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var nss []string
	for _, name := range []string{"client", "server", "node1", "node2"} {
		ns, _, err := l.Endpoint(name)
		if err == nil && ns != "" && !seen[ns] {
			seen[ns] = true
			nss = append(nss, ns)
		}
	}
	if len(nss) == 0 {
		return l, nil
	}
	rep, err := tune.Apply(tune.ApplyOptions{Env: t.env, Profile: t.profile, Knobs: t.knobs, Netns: nss,
		ScopeLabel: "lab:" + l.Name() + " (" + t.label + ")", JournalDir: t.dir})
	t.mu.Lock()
	defer t.mu.Unlock()
	if rep != nil {
		if rep.Journal != "" {
			t.add(rep.Journal)
		}
		t.changes += len(rep.Changes) - rep.Failed()
		fmt.Fprintf(t.out, "applied in lab %s (%s):\n", l.Name(), spec.Source())
		t.onApply(t.out, rep)
	}
	if err != nil || (rep != nil && rep.Failed() > 0) {
		// A half-tuned lab would measure neither state: stop here.
		tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = l.Down(tctx)
		if err == nil {
			err = fmt.Errorf("%d knobs failed", rep.Failed())
		}
		return nil, fmt.Errorf("tune lab %s: %w", l.Name(), err)
	}
	return l, nil
}

// WriteComparison prints the after run against the before run with
// significance verdicts (report.Compare), under a line naming the profile
// and scope.
func (r *Result) WriteComparison(w io.Writer, db *store.DB, p tune.Profile, scope string) error {
	before, sb, err := db.Load(fmt.Sprint(r.Before))
	if err != nil {
		return err
	}
	after, sa, err := db.Load(fmt.Sprint(r.After))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nA = before, B = after applying the %s profile (%s scope)\n", p, scope)
	return report.Compare(w, before, sb, after, sa)
}
