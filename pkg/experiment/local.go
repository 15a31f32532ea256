package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/cnibench/cnibench/pkg/disturb"
	"github.com/cnibench/cnibench/pkg/driver/builtin"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/sysinfo"
)

// ErrNotRoot is returned by RunLocal when it cannot build namespaces.
var ErrNotRoot = errors.New("running an experiment builds network namespaces and needs root: run it with sudo")

// LocalOptions are what a run on this host needs besides the experiment.
type LocalOptions struct {
	DBPath  string // the results database, created when missing
	Kind    string // the run's kind in the store (store.KindLab unless set)
	Version string // this binary's version, for the host fingerprint
	// Progress gets the progress lines (a redrawn bar on a terminal).
	Progress io.Writer
	// Profile, when set, samples every CPU during each measured window of
	// the arms in ProfileArms (nil: every arm).
	Profile     *profile.Options
	ProfileArms map[string]bool
}

// RunLocal runs e on this host with the production collaborators: labs from
// pkg/lab, measurements by the drivers, samples into the results database
// as they finish, wake-up policy, disturbance stamps and the profiler when
// asked. Everything that can refuse the run (root, perf permission, a
// missing tool) is checked before the database is opened or anything
// built. The run id is non-zero once the run is stored, also with an error;
// a run with failed steps returns a *StepsFailedError.
func RunLocal(ctx context.Context, e *Experiment, o LocalOptions) (int64, error) {
	if os.Geteuid() != 0 {
		return 0, ErrNotRoot
	}
	var profiler Profiler
	if o.Profile != nil {
		sess, err := profile.Open(*o.Profile)
		if err != nil {
			return 0, fmt.Errorf("--profile: %w", err)
		}
		defer sess.Close()
		profiler = sess
		fmt.Fprintf(o.Progress, "profiling every CPU at %d Hz (%s) during each measured window\n", o.Profile.Frequency, sess.Event())
	}
	if err := e.Preflight(); err != nil {
		return 0, err
	}
	// The spinner of --wakeup spin is this binary run as another process.
	exe, err := builtin.Bin()
	if err != nil {
		return 0, err
	}
	db, err := store.Open(o.DBPath)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	host := sysinfo.Host.Fingerprint(o.Version)
	// What this kernel can build goes with every run (about 0.1 s), so a
	// report across hosts says why an arm is missing on one of them.
	if pr, err := lab.Probe(ctx); err == nil {
		host.Capabilities = pr.Supported()
	}
	fmt.Fprintf(o.Progress, "experiment %s: %d arms, %d steps\n", e.Name, len(e.Arms), len(e.Plan()))
	runID, err := Execute(ctx, e, Options{
		Labs:        Labs{},
		Measurer:    Drivers{},
		Sink:        StoreSink{DB: db, Kind: o.Kind, Host: host},
		Progress:    o.Progress,
		IsTerminal:  IsTerminal(o.Progress),
		Profiler:    profiler,
		ProfileArms: o.ProfileArms,
		Wakeup:      Controller{Exe: exe},
		Disturb:     disturb.New(sysinfo.Host),
		// The file's retake_disturbed, or --retake-disturbed.
		RetakeDisturbed: e.RetakeDisturbed,
	})
	if runID != 0 {
		fmt.Fprintf(o.Progress, "stored as run %d in %s\n", runID, db.Path())
	}
	return runID, err
}

// IsTerminal reports whether w is a terminal (progress is then redrawn in
// place rather than printed a line a step).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
