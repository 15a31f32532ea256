package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/sysinfo"
	"github.com/cnibench/cnibench/pkg/tune"
)

type verifyOptions struct {
	profile, exp, scope, only, db, journalDir string
	keep, yes                                 bool
	run                                       runOptions
}

func newTuneVerifyCmd() *cobra.Command {
	var o verifyOptions
	c := &cobra.Command{
		Use:   "verify --profile P --experiment FILE|NAME",
		Short: "Measure an experiment, apply a profile, measure again, roll back, and compare",
		Long: `verify runs the experiment as it is ("before"), applies the profile, runs it again
("after"), rolls back (unless --keep) and prints the before/after comparison with
significance verdicts: the "default vs optimized" table of the Kube-OVN document,
measured on this host.

--scope lab (default) applies the per-namespace knobs inside each lab the "after"
run builds, and nothing on the host. --scope host --yes also applies the host
knobs (CPU, IRQs, busy polling, socket buffer caps, …) for the "after" run, and,
for the latency profile, holds /dev/cpu_dma_latency while it measures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVerify(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), &o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.profile, "profile", "", "latency or throughput")
	f.StringVar(&o.exp, "experiment", "", "experiment file, or the name of a ready experiment")
	f.StringVar(&o.scope, "scope", "lab", "lab (the experiment's lab namespaces only) or host (also this host; needs --yes)")
	f.StringVar(&o.only, "only", "", "comma-separated knob ids (default: all)")
	f.BoolVar(&o.keep, "keep", false, "keep the profile applied afterwards (host changes stay; lab namespaces go with their labs)")
	f.BoolVar(&o.yes, "yes", false, "confirm changing this host (needed for --scope host)")
	f.StringVar(&o.journalDir, "journal-dir", tune.DefaultJournalDir, "where journals are written")
	addDBFlag(c, &o.db)
	f.IntVar(&o.run.repeats, "repeats", 0, "override the experiment's repeats")
	f.DurationVar(&o.run.duration, "duration", 0, "override the measured interval of each step")
	f.StringVar(&o.run.warmup, "warmup", "", "override the warmup of each step, e.g. 500ms")
	f.StringSliceVar(&o.run.arms, "arms", nil, "run only these arms")
	return c
}

func runVerify(ctx context.Context, stdout, stderr io.Writer, o *verifyOptions) error {
	if o.profile == "" || o.exp == "" {
		return UsageError{errors.New("verify needs --profile latency|throughput and --experiment FILE|NAME")}
	}
	p, err := tune.ParseProfile(o.profile)
	if err != nil {
		return UsageError{err}
	}
	ks, err := tune.Select(splitIDs(o.only))
	if err != nil {
		return UsageError{err}
	}
	host := false
	switch o.scope {
	case "lab":
	case "host":
		if !o.yes {
			return UsageError{errors.New("verify --scope host changes this machine's settings during the second run: add --yes")}
		}
		host = true
	default:
		return UsageError{fmt.Errorf("bad --scope %q for verify: use lab or host", o.scope)}
	}
	e, err := experiment.Load(o.exp)
	if err != nil {
		return UsageError{err}
	}
	o.run.format = "none"
	if err := o.run.override(e); err != nil {
		return UsageError{err}
	}
	if os.Geteuid() != 0 {
		return errors.New("verify builds network namespaces and changes kernel settings: run it with sudo")
	}
	db, err := store.Open(o.db)
	if err != nil {
		return err
	}
	defer db.Close()

	id := runid.New()
	base := fmt.Sprintf("%s-%s-%s", e.Name, p, id)
	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	execute := func(phase string, labs experiment.LabProvider) (int64, error) {
		x := *e
		x.Name = base + "-" + phase
		fmt.Fprintf(stderr, "%s: experiment %s, %d arms, %d steps\n", phase, e.Name, len(e.Arms), len(e.Plan()))
		runID, err := experiment.Execute(ctx, &x, experiment.Options{
			Labs: labs, Measurer: experiment.Drivers{},
			Sink:     experiment.StoreSink{DB: db, Kind: store.KindTuneVerify, Host: sysinfo.Host.Fingerprint(Version)},
			Progress: stderr, IsTerminal: tty,
		})
		if runID != 0 {
			fmt.Fprintf(stderr, "%s: stored as run %d (%s)\n", phase, runID, x.Name)
		}
		return runID, err
	}

	// A step that fails (an arm this kernel cannot build) is in both runs'
	// reports; verify goes on and exits 1 at the end, as `run` does.
	var stepsFailed error
	tolerate := func(phase string, err error) error {
		var sf *experiment.StepsFailedError
		if errors.As(err, &sf) {
			stepsFailed = fmt.Errorf("%s run: %w", phase, err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s run: %w", phase, err)
		}
		return nil
	}
	before, err := execute("before", experiment.Labs{})
	if err := tolerate("before", err); err != nil {
		return err
	}

	// From here on every path out rolls back what was applied, with a
	// fresh context so Ctrl-C does not skip it.
	var journals []string
	var jmu sync.Mutex
	addJournal := func(j string) {
		jmu.Lock()
		journals = append(journals, j)
		jmu.Unlock()
	}
	env := tune.DefaultEnv()
	defer func() {
		if o.keep {
			if len(journals) > 0 {
				fmt.Fprintf(stdout, "kept the profile (--keep); undo with `cnibench tune rollback --journal-dir %s`\n", o.journalDir)
			}
			return
		}
		for i := len(journals) - 1; i >= 0; i-- {
			if _, rerr := tune.Rollback(env, journals[i]); rerr != nil && !errors.Is(rerr, tune.ErrRolledBack) {
				fmt.Fprintf(stderr, "rollback %s: %v; run `cnibench tune rollback --journal %s`\n", journals[i], rerr, journals[i])
			}
		}
		if len(journals) > 0 {
			fmt.Fprintf(stdout, "rolled back %d journals\n", len(journals))
		}
	}()

	if host {
		var hostKs []*tune.Knob
		for _, k := range ks {
			if k.Scope != tune.ScopeNetns {
				hostKs = append(hostKs, k)
			}
		}
		// Per-namespace knobs in the host's namespace too: new namespaces
		// copy some of them (tcp_rmem, tcp_wmem, congestion control).
		hostKs = append(hostKs, netnsKnobs(ks)...)
		rep, err := tune.Apply(tune.ApplyOptions{Env: env, Profile: p, Knobs: hostKs, ScopeLabel: "host (verify " + base + ")", JournalDir: o.journalDir})
		if rep != nil && rep.Journal != "" {
			addJournal(rep.Journal)
		}
		if rep != nil {
			fmt.Fprintln(stdout, "applied on the host:")
			printApply(stdout, rep, false)
		}
		if err != nil {
			return err
		}
		if k, _ := tune.Lookup("cpu.dma_latency"); selected(ks, k) {
			if rec, ok := k.Recs[p]; ok {
				var us int32
				fmt.Sscan(rec.Value, &us)
				release, herr := tune.HoldDMALatency(env, us)
				if herr != nil {
					fmt.Fprintf(stdout, "cpu.dma_latency: not held: %v\n", herr)
				} else {
					defer release()
					fmt.Fprintf(stdout, "cpu.dma_latency: held at %d µs for the after run\n", us)
				}
			}
		}
	}

	labs := &tunedLabs{inner: experiment.Labs{}, env: env, profile: p, knobs: netnsKnobs(ks), dir: o.journalDir,
		label: "verify " + base, out: stdout, add: addJournal}
	after, err := execute("after", labs)
	if err := tolerate("after", err); err != nil {
		return err
	}
	if labs.changes == 0 && !host {
		fmt.Fprintln(stdout, "note: no per-namespace knob differed in the labs; before and after ran the same settings")
	}

	runA, err := db.GetRun(fmt.Sprint(before))
	if err != nil {
		return err
	}
	runB, err := db.GetRun(fmt.Sprint(after))
	if err != nil {
		return err
	}
	sA, err := db.Samples(before)
	if err != nil {
		return err
	}
	sB, err := db.Samples(after)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nA = before, B = after applying the %s profile (%s scope)\n", p, o.scope)
	if err := report.Compare(stdout, runA, sA, runB, sB); err != nil {
		return err
	}
	return stepsFailed
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

// tunedLabs builds labs like experiment.Labs and then applies the profile's
// per-namespace knobs inside each new lab's endpoint namespaces, journaled.
type tunedLabs struct {
	inner   experiment.LabProvider
	env     *tune.Env
	profile tune.Profile
	knobs   []*tune.Knob
	dir     string
	label   string
	out     io.Writer
	add     func(string)

	mu      sync.Mutex
	changes int
}

func (t *tunedLabs) Up(ctx context.Context, topology, dir string, knobs map[string]string) (experiment.LabInstance, error) {
	l, err := t.inner.Up(ctx, topology, dir, knobs)
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
		fmt.Fprintf(t.out, "applied in lab %s (%s):\n", l.Name(), topology)
		printApply(t.out, rep, false)
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
