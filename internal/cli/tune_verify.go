package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/cnibench/cnibench/pkg/disturb"
	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/sysinfo"
	"github.com/cnibench/cnibench/pkg/tune"
	"github.com/cnibench/cnibench/pkg/units"
	"github.com/cnibench/cnibench/pkg/verify"
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
	ks, err := tune.Select(units.SplitList(o.only))
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
	if err := e.Preflight(); err != nil {
		return err
	}
	db, err := store.Open(o.db)
	if err != nil {
		return err
	}
	defer db.Close()
	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	res, err := verify.Verify(ctx, verify.Options{Experiment: e, Profile: p, Knobs: ks, Host: host, Keep: o.keep,
		JournalDir: o.journalDir, DB: db, Fingerprint: sysinfo.Host.Fingerprint(Version),
		Out: stdout, Progress: stderr, IsTerminal: tty, Disturb: disturb.New(sysinfo.Host),
		OnApply: func(w io.Writer, rep *tune.ApplyReport) { tune.WriteApply(w, rep, false) }})
	var failed *experiment.StepsFailedError
	if err != nil && !errors.As(err, &failed) {
		return err
	}
	if cerr := res.WriteComparison(stdout, db, p, o.scope); cerr != nil {
		return cerr
	}
	return err
}
