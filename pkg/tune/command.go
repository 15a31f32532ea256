package tune

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/units"
)

// ErrInvalid is matched (errors.Is) by the errors of the commands' options
// below that the user fixes by changing the command line.
var ErrInvalid = errors.New("invalid tune options")

// Help is `cnibench tune --help`'s description.
const Help = "tune reads the knobs the Kube-OVN, OVS and Cilium documents and the tuned profiles name,\n" +
	"compares them with a latency or throughput profile, applies a profile with a journal\n" +
	"written before any change, and rolls back exactly. See docs/tuning.md."

// Selection is what `tune audit` and `tune apply` act on, as given: a
// profile, knob ids and a scope.
type Selection struct {
	Profile string // latency or throughput; "" = both (audit only)
	Only    string // comma-separated knob ids; "" = all
	Scope   string // host, lab:<name> or netns:<name>
	// Namespaces resolves Scope to the network namespaces it names (none
	// for the host); the lab package knows what a lab's namespaces are.
	Namespaces func(scope string) ([]string, error)
}

// resolve checks the selection: the profiles it names, its knobs and the
// namespaces of its scope.
func (s Selection) resolve() ([]Profile, []*Knob, []string, error) {
	profiles := Profiles()
	if s.Profile != "" {
		p, err := ParseProfile(s.Profile)
		if err != nil {
			return nil, nil, nil, errkind.Wrap(ErrInvalid, err)
		}
		profiles = []Profile{p}
	}
	ks, err := Select(units.SplitList(s.Only))
	if err != nil {
		return nil, nil, nil, errkind.Wrap(ErrInvalid, err)
	}
	var nss []string
	if s.Namespaces != nil {
		if nss, err = s.Namespaces(s.Scope); err != nil {
			return nil, nil, nil, err
		}
	}
	return profiles, ks, nss, nil
}

// AuditCommand is `cnibench tune audit` as given.
type AuditCommand struct {
	Selection
	Root string // read /proc, /sys and /dev under it; "/" is this host
	JSON bool
}

// Run writes every selected knob's finding to w: a table, with a profile
// column when both profiles were judged, or with JSON one array.
func (c AuditCommand) Run(w io.Writer) error {
	profiles, ks, nss, err := c.resolve()
	if err != nil {
		return err
	}
	fs := AuditNetns(EnvAt(c.Root), ks, profiles, nss)
	if c.JSON {
		return writeJSON(w, fs)
	}
	return WriteFindings(w, fs, len(profiles) > 1)
}

// ApplyCommand is `cnibench tune apply` as given.
type ApplyCommand struct {
	Selection
	Yes, DryRun bool // Yes confirms changing the host (scope host)
	JournalDir  string
	JSON        bool
}

// Run checks c, applies it and writes what changed to w, as a table or
// with JSON the report as one document.
func (c ApplyCommand) Run(w io.Writer) error {
	o, err := c.Options()
	if err != nil {
		return err
	}
	return applyPrint(o, func(rep *ApplyReport) error {
		if c.JSON {
			return writeJSON(w, rep)
		}
		WriteApply(w, rep, c.DryRun)
		return nil
	})
}

// Options checks c — a profile is required, and the host scope needs Yes
// or DryRun, and root unless DryRun — and returns Apply's options.
func (c ApplyCommand) Options() (ApplyOptions, error) {
	if c.Profile == "" {
		return ApplyOptions{}, errkind.Errorf(ErrInvalid, "apply needs --profile latency or --profile throughput")
	}
	profiles, ks, nss, err := c.resolve()
	if err != nil {
		return ApplyOptions{}, err
	}
	if len(nss) == 0 && !c.Yes && !c.DryRun {
		return ApplyOptions{}, errkind.Errorf(ErrInvalid, "apply --scope host changes this machine's settings: add --yes, or --dry-run to see the plan")
	}
	if !c.DryRun && os.Geteuid() != 0 {
		return ApplyOptions{}, errkind.Errorf(ErrInvalid, "apply writes kernel settings and needs root: run it with sudo, or use --dry-run")
	}
	label := c.Scope
	if label == "" {
		label = "host"
	}
	return ApplyOptions{Env: DefaultEnv(), Profile: profiles[0], Knobs: ks, Netns: nss,
		ScopeLabel: label, DryRun: c.DryRun, JournalDir: c.JournalDir}, nil
}

// applyPrint applies o and prints what changed through print (also when
// some changes failed); any failed change makes the error, naming the
// journal that undoes the rest.
func applyPrint(o ApplyOptions, print func(*ApplyReport) error) error {
	rep, err := Apply(o)
	if rep != nil {
		if perr := print(rep); perr != nil {
			return perr
		}
	}
	if err != nil {
		return err
	}
	if n := rep.Failed(); n > 0 {
		return fmt.Errorf("%d of %d changes failed (see above); the journal %s records the rest: `cnibench tune rollback` undoes them",
			n, len(rep.Changes), rep.Journal)
	}
	return nil
}

// RollbackPrint is `cnibench tune rollback`: the one journal file when
// given, else every journal in dir not rolled back (newest first), with a
// line saying what was restored.
func RollbackPrint(e *Env, dir, file string, w io.Writer) error {
	if file != "" {
		if _, err := os.Stat(file); err != nil {
			return errkind.Errorf(ErrInvalid, "--journal %s: %w", file, err)
		}
		n, err := Rollback(e, file)
		if errors.Is(err, ErrRolledBack) {
			fmt.Fprintf(w, "%s was already rolled back: nothing to do\n", file)
			return nil
		}
		fmt.Fprintf(w, "restored %d values from %s\n", n, file)
		return err
	}
	js, n, err := RollbackAll(e, dir)
	if js == 0 && err == nil {
		fmt.Fprintf(w, "no applied journals in %s: nothing to roll back\n", dir)
		return nil
	}
	fmt.Fprintf(w, "restored %d values from %d journals\n", n, js)
	return err
}
