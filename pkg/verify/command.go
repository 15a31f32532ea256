package verify

import (
	"context"
	"errors"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/cnibench/cnibench/pkg/disturb"
	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/sysinfo"
	"github.com/cnibench/cnibench/pkg/tune"
	"github.com/cnibench/cnibench/pkg/units"
)

// ErrInvalid is matched (errors.Is) by Command's errors about its flags.
var ErrInvalid = errors.New("invalid verify flags")

// Help is `cnibench tune verify --help`'s description.
const Help = `verify runs the experiment as it is ("before"), applies the profile, runs it again
("after"), rolls back (unless --keep) and prints the before/after comparison with
significance verdicts: the "default vs optimized" table of the Kube-OVN document,
measured on this host.

--scope lab (default) applies the per-namespace knobs inside each lab the "after"
run builds, and nothing on the host. --scope host --yes also applies the host
knobs (CPU, IRQs, busy polling, socket buffer caps, …) for the "after" run, and,
for the latency profile, holds /dev/cpu_dma_latency while it measures.`

// Command is `cnibench tune verify` as given.
type Command struct {
	Profile    string // latency or throughput (required)
	Experiment string // a file or a ready experiment's name (required)
	Scope      string // lab, or host (needs Yes)
	Only       string // comma-separated knob ids; "" = all
	Keep, Yes  bool
	DB         string
	JournalDir string
	Run        experiment.RunFlags
	Version    string
}

// Options checks the flags and loads the experiment with its overrides,
// before anything is stored or changed.
func (c Command) Options() (Options, error) {
	if c.Profile == "" || c.Experiment == "" {
		return Options{}, errkind.Errorf(ErrInvalid, "verify needs --profile latency|throughput and --experiment FILE|NAME")
	}
	p, err := tune.ParseProfile(c.Profile)
	if err != nil {
		return Options{}, errkind.Wrap(ErrInvalid, err)
	}
	ks, err := tune.Select(units.SplitList(c.Only))
	if err != nil {
		return Options{}, errkind.Wrap(ErrInvalid, err)
	}
	o := Options{Profile: p, Knobs: ks, Keep: c.Keep, JournalDir: c.JournalDir}
	switch c.Scope {
	case "lab":
	case "host":
		if !c.Yes {
			return Options{}, errkind.Errorf(ErrInvalid, "verify --scope host changes this machine's settings during the second run: add --yes")
		}
		o.Host = true
	default:
		return Options{}, errkind.Errorf(ErrInvalid, "bad --scope %q for verify: use lab or host", c.Scope)
	}
	if o.Experiment, err = experiment.Load(c.Experiment); err != nil {
		return Options{}, err
	}
	return o, c.Run.Apply(o.Experiment)
}

// Verify checks the flags, needs root and the experiment's tools, then
// runs Verify on this host with the production collaborators and prints
// the before/after comparison to stdout (also when steps failed, whose
// error it then returns). Progress goes to stderr.
func (c Command) Verify(ctx context.Context, stdout, stderr io.Writer) error {
	o, err := c.Options()
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("verify builds network namespaces and changes kernel settings: run it with sudo")
	}
	if err := o.Experiment.Preflight(); err != nil {
		return err
	}
	db, err := store.Open(c.DB)
	if err != nil {
		return err
	}
	defer db.Close()
	if f, ok := stderr.(*os.File); ok {
		o.IsTerminal = term.IsTerminal(int(f.Fd()))
	}
	o.DB, o.Fingerprint, o.Disturb = db, sysinfo.Host.Fingerprint(c.Version), disturb.New(sysinfo.Host)
	o.Out, o.Progress = stdout, stderr
	o.OnApply = func(w io.Writer, rep *tune.ApplyReport) { tune.WriteApply(w, rep, false) }
	res, err := Verify(ctx, o)
	var failed *experiment.StepsFailedError
	if err != nil && !errors.As(err, &failed) {
		return err
	}
	if cerr := res.WriteComparison(stdout, db, o.Profile, c.Scope); cerr != nil {
		return cerr
	}
	return err
}
