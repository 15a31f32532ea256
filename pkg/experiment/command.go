package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/store"
)

// RunFlags are the overrides `run`, `crosscheck` and `tune verify` take,
// as given: warmup, precision and budget stay text so that "unset"
// differs from 0.
type RunFlags struct {
	Repeats                   int
	Duration                  time.Duration
	Warmup, Precision, Budget string
	Arms                      []string
	Wakeup, CPUs              string
	RetakeDisturbed           bool
}

// Apply parses the flags and overrides e with them; its errors wrap
// ErrInvalid and name the flag.
func (f RunFlags) Apply(e *Experiment) error {
	ov := Overrides{Repeats: f.Repeats, Duration: f.Duration, Arms: f.Arms,
		Wakeup: f.Wakeup, CPUs: f.CPUs, RetakeDisturbed: f.RetakeDisturbed}
	if err := ov.SetText(f.Warmup, f.Precision, f.Budget); err != nil {
		return err
	}
	return e.Override(ov)
}

// CrosscheckHelp is `cnibench crosscheck --help`'s description.
const CrosscheckHelp = `Runs the ready experiment "crosscheck": the built-in engine and each reference
tool on the same veth pair, interleaved in one run, and prints every arm as a
ratio to the built-in engine. It is the method behind the engine's accuracy
claims (docs/engine.md). A tool that lacks a test is not asked for it.`

// RunHelp is `cnibench run --help`'s description.
func RunHelp() string {
	return `Run an experiment file, or a ready experiment by name (default: "default").
Ready experiments: ` + strings.Join(ReadyNames(), ", ") + `.

Each distinct lab topology is built once and kept up for the whole run so the
steps can be interleaved (A B C A B C …); every lab is removed at the end, also
on failure and Ctrl-C. Each sample is stored as it finishes, so an interrupted
run keeps what it measured and is marked incomplete.`
}

// RunCommand is `cnibench run` (and `crosscheck`) as given.
type RunCommand struct {
	Ref   string // an experiment file, or the name of a ready experiment
	Flags RunFlags
	// Format is the report printed at the end (report.Formats, or "none"),
	// to Output ("" = standard output).
	Format, Output string
	// Margin is the report's equivalence margin as given (--margin;
	// "" = report's default).
	Margin string
	// Local is how the run is taken; its Profile and ProfileArms come
	// from Profile, the --profile flags as given.
	Local   LocalOptions
	Profile profile.Flags
}

// measured reports whether a run that returned err still has results to
// report: it was interrupted, some steps failed, or only its teardown did.
func measured(err error) bool {
	var failed *StepsFailedError
	var teardown *TeardownError
	return errors.Is(err, ErrInterrupted) || errors.As(err, &failed) || errors.As(err, &teardown)
}

// Run loads and checks the experiment with its overrides (ErrInvalid
// errors, before anything is stored or built), runs it on this host with
// RunLocal and renders the stored run's report — also of an interrupted
// run, or one with failed steps, or one whose labs could not all be
// removed, whose error it then returns. Progress lines go to progress.
func (c RunCommand) Run(ctx context.Context, stdout, progress io.Writer) error {
	c.Local.Progress = progress
	var err error
	if c.Local.Profile, err = c.Profile.Options(); err != nil {
		return err
	}
	e, err := Load(c.Ref)
	if err != nil {
		return err
	}
	if err := c.Flags.Apply(e); err != nil {
		return err
	}
	if c.Format != "none" && !report.ValidFormat(c.Format) {
		return errkind.Errorf(ErrInvalid, "--format %q: want %s or none", c.Format, strings.Join(report.Formats, ", "))
	}
	var ropts report.Options
	if c.Margin != "" {
		if ropts.Margin, err = report.ParseMargin(c.Margin); err != nil {
			return errkind.Wrap(ErrInvalid, err)
		}
	}
	if c.Local.Profile != nil {
		if c.Local.ProfileArms, err = e.ArmSet("--profile-arms", c.Profile.Arms); err != nil {
			return err
		}
	}
	runID, err := RunLocal(ctx, e, c.Local)
	if err != nil && !measured(err) {
		return err
	}
	if runID != 0 && c.Format != "none" {
		rerr := report.WriteFile(stdout, c.Output, func(w io.Writer) error {
			db, err := store.Open(c.Local.DBPath)
			if err != nil {
				return err
			}
			defer db.Close()
			return ropts.RenderStored(w, c.Format, db, fmt.Sprint(runID))
		})
		if rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
