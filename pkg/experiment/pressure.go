package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/atomicfile"
	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/pressure"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/sysinfo"
)

// PressureHelp is `cnibench pressure --help`'s description.
const PressureHelp = `Pressure runs an experiment's pressure: block (e.g. the ready experiment
conntrack-limits): for each arm, each held-flows value and repeat it builds the
arm's lab, opens the held flows, offers each rate of new connections in turn
and stops at the knee — the first step where connections fail or fall behind
— naming the cause from the datapath's counters (conntrack count against
nf_conntrack_max, drop, early_drop, insert_failed; SYN retransmits; listen
overflows) or the client. Labs are removed after each ramp, also on failure
and Ctrl-C. Every measured run is stored in the results database (--db);
` + "`cnibench pressure report RUN`" + ` prints it again. See docs/pressure.md.`

// PressureCommand is `cnibench pressure`: the experiment's pressure block
// ramped on its arms (pkg/pressure), printed as a table or JSON and stored
// in the results database.
type PressureCommand struct {
	Ref   string   // experiment file or ready name
	Arms  []string // only these arms; empty = all
	Flows []int    // override pressure.flows
	// Repeats overrides pressure.repeats; 0 keeps it.
	Repeats int
	JSON    bool
	Output  string // write here instead of out
	DB      string // the results database every measured run is stored in
	Version string // cnibench's, stored with the run
}

// ErrPressureFailed is returned (after the results are printed) when a
// ramp could not run to its end.
var ErrPressureFailed = errors.New("pressure ramps failed")

// Run loads and checks everything before it builds anything.
func (c PressureCommand) Run(ctx context.Context, out, log io.Writer) error {
	e, err := Load(c.Ref)
	if err != nil {
		return err
	}
	if e.Pressure == nil {
		return errkind.Errorf(ErrInvalid, "experiment %s has no pressure: block (cnibench pressure ramps one; see docs/pressure.md, e.g. `cnibench pressure conntrack-limits`)", e.Name)
	}
	cfg := *e.Pressure
	if len(c.Flows) > 0 {
		cfg.Flows = c.Flows
		if err := cfg.Check(); err != nil {
			return errkind.Errorf(ErrInvalid, "--flows: %v", err)
		}
	}
	if c.Repeats != 0 {
		cfg.Repeats = c.Repeats
		if err := cfg.Check(); err != nil {
			return errkind.Errorf(ErrInvalid, "--repeats: %v", err)
		}
	}
	var arms []pressure.Arm
	for i := range e.Arms {
		a := &e.Arms[i]
		if len(c.Arms) > 0 && !contains(c.Arms, a.Name) {
			continue
		}
		if a.lab == nil {
			return errkind.Errorf(ErrInvalid, "arm %q: pressure needs a lab topology (server_address arms are not ramped)", a.Name)
		}
		arms = append(arms, pressure.Arm{Name: a.Name, Topology: a.Topology, Knobs: a.Knobs, Spec: a.lab, Client: a.Client, Server: a.Server})
	}
	for _, n := range c.Arms {
		if !contains(armNames(e), n) {
			return errkind.Errorf(ErrInvalid, "--arms: no arm %q in %s (arms: %s)", n, e.Name, strings.Join(armNames(e), ", "))
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("pressure: needs root (it builds labs of network namespaces); run with sudo")
	}
	// Opened before any lab is built: a --db that cannot be used fails
	// here, not after minutes of ramps.
	db, err := store.Open(c.DB)
	if err != nil {
		if !errors.Is(err, store.ErrInvalid) {
			err = errkind.Errorf(ErrInvalid, "--db: %v (give a writable SQLite file or a postgres:// URL)", err)
		}
		return err
	}
	defer db.Close()
	doc := pressure.Document{Schema: pressure.Schema, Experiment: e.Name, Started: time.Now().UTC().Format(time.RFC3339), Config: cfg}
	res, runErr := pressure.Run(ctx, arms, pressure.Options{Config: cfg, Log: log})
	doc.Arms = res
	if runErr == nil {
		runErr = rampsFailed(res)
	}
	w := out
	var buf strings.Builder
	if c.Output != "" {
		w = &buf
	}
	if c.JSON {
		if err := pressure.WriteJSON(w, &doc); err != nil {
			return err
		}
	} else {
		pressure.WriteText(w, &doc)
	}
	errs := []error{runErr}
	if c.Output != "" {
		errs = append(errs, atomicfile.Write(c.Output, 0o644, func(f io.Writer) error { _, err := io.WriteString(f, buf.String()); return err }))
	}
	// Stored last: a database that fails loses nothing already printed
	// or written, and says so.
	if pressure.Measured(&doc) {
		o := pressure.StoreOptions{Version: c.Version, Host: sysinfo.Host.Fingerprint(c.Version), Experiment: e.Text, Err: runErr}
		if slices.ContainsFunc(arms, func(a pressure.Arm) bool { return a.Name == e.Baseline }) {
			o.Baseline = e.Baseline
		}
		if run, err := pressure.Save(db, &doc, o); err != nil {
			errs = append(errs, fmt.Errorf("pressure: the result was not stored in %s: %w", db.Path(), err))
		} else {
			fmt.Fprintf(log, "stored as run %d (%s) in %s; read it back with: cnibench pressure report %s\n", run.ID, run.Name, db.Path(), run.Name)
		}
	}
	return errors.Join(errs...)
}

// rampsFailed is ErrPressureFailed when some ramp could not run to its end.
func rampsFailed(res []pressure.ArmResult) error {
	failed := 0
	for _, a := range res {
		for _, r := range a.Ramps {
			if r.Error != "" {
				failed++
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d ramps did not run to their end (their errors are in the results)", ErrPressureFailed, failed)
	}
	return nil
}

func armNames(e *Experiment) []string {
	out := make([]string, len(e.Arms))
	for i, a := range e.Arms {
		out[i] = a.Name
	}
	return out
}
