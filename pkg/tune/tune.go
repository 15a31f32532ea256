// Package tune is cnibench's registry of host and datapath knobs: what each
// knob reads and writes, what the source documents recommend for a latency or
// a throughput profile, and how to apply it with a journal and roll it back.
//
// It is also the one mechanism by which cnibench changes a host or
// namespace setting at all. A profile goes through Apply; anything else —
// the lab's sysctls and offloads, and whatever a lab knob needs next
// (hugepages, busy polling) — opens a Journal and changes values through
// it:
//
//	j, err := tune.NewJournal(tune.JournalOptions{Dir: dir, ID: runID, Scope: "lab:" + name})
//	// record j.Path() in the owner's state before the first change, then:
//	err = j.SetSysctl("", "net.core.rmem_max", "16777216") // host scope
//	err = j.SetSysctl(ns, "net.ipv4.ip_forward", "1")       // one namespace
//	err = j.SetSysfs("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "512")
//	fixed, err := j.SetOffloads(ns, "eth0", map[string]bool{"gro": false})
//	mark := j.Seq() // …; err = j.Undo(mark) gives back what came after
//	j.Close()
//	n, err := tune.Rollback(tune.DefaultEnv(), path) // on every path out
//
// Each change reads the value as it is, appends a "change" line holding that
// exact text and fsyncs it, and only then writes; Rollback writes the same
// bytes back, newest first, and counts changes inside a namespace or of an
// interface that no longer exists as restored. A host-wide setting another
// journal of the same directory holds is refused (ErrHeld): two owners of
// one value could not both undo it exactly. Journals are JSON lines, one
// format for Apply and Journal alike, listed by Journals and HeldChanges
// for `tune status`.
//
// Files, by what they hold: tune.go the registry's types and lookups,
// env.go where knobs read and write (Env, EnvAt), audit.go Audit; the
// knobs by family, one file each (sysctl.go, cpu.go, nic.go, conntrack.go —
// which also audits kube-proxy's rules —, ovs.go, mtu.go), sources.go the
// documents they come from; journal.go the Journal type and its Set*
// changes, journalfile.go the journal file (Entry, ReadJournal, fsync,
// lock); apply.go Apply; rollback.go Rollback, RollbackAll, Journal.Undo
// and restore, the one place a change is undone; status.go Journals and
// HeldChanges; text.go every table printed; command.go the commands'
// options. Every /proc, /sys and /dev path goes through Env's roots, the
// way node_exporter's --path.procfs works, so audits and journaled changes
// run on fixture trees in tests without root.
package tune

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// Profile names a set of recommendations.
type Profile string

// The two profiles, named after the tuned profiles the Kube-OVN document
// points to (network-latency, network-throughput).
const (
	Latency    Profile = "latency"
	Throughput Profile = "throughput"
)

// Profiles lists every profile in display order.
func Profiles() []Profile { return []Profile{Latency, Throughput} }

// ParseProfile checks a user-given profile name.
func ParseProfile(s string) (Profile, error) {
	switch Profile(s) {
	case Latency, Throughput:
		return Profile(s), nil
	}
	return "", fmt.Errorf("unknown profile %q: use latency or throughput", s)
}

// Scope says where a knob lives, which decides who may change it.
type Scope string

const (
	// ScopeHost knobs are global to the machine (CPU, /sys, non-namespaced sysctls).
	ScopeHost Scope = "host"
	// ScopeNetns knobs exist once per network namespace (most net.* sysctls).
	ScopeNetns Scope = "netns"
	// ScopeNIC knobs belong to one network interface (rings, offloads, IRQs).
	ScopeNIC Scope = "nic"
	// ScopeOVS knobs live in the Open vSwitch database.
	ScopeOVS Scope = "ovs"
)

// Status is the verdict of an audit line.
type Status string

const (
	StatusOK         Status = "ok"
	StatusDiffers    Status = "differs"
	StatusCannotRead Status = "cannot read"
	// StatusNoRec means the knob was read but no source recommends a value
	// for this profile; it is shown so the audit records it.
	StatusNoRec Status = "no recommendation"
)

// Rec is one recommendation: the value and where it comes from.
type Rec struct {
	Value  string
	Source string
}

// both recommends the same value for both profiles, each with its source.
func both(v, latSrc, thrSrc string) map[Profile]Rec {
	return map[Profile]Rec{Latency: {v, latSrc}, Throughput: {v, thrSrc}}
}

// Current is one target's present value. Raw is what must be written back to
// restore it exactly (for sysctls: the text as read, byte for byte); Absent
// marks a setting that does not exist yet (an OVS other_config key), which
// rollback restores by removing it.
type Current struct {
	Target string // "" for single-valued knobs; cpu0, eth0, eth0/rx-gro, irq 38 …
	Value  string // for display
	Raw    string
	Absent bool
	Err    error // could not read this target: the reason

	hint string // knob-private: e.g. the maximum ring size or the CPU to pin to
}

// Knob is one entry of the registry.
type Knob struct {
	ID     string
	Title  string
	Family string
	Scope  Scope
	// Access names exactly what the knob reads and writes: a path relative to
	// the configured roots, or the API used.
	Access string
	Risk   string
	// AuditOnly knobs are never written by apply; Why says what to do instead.
	AuditOnly bool
	Why       string
	// Recs holds the recommendation per profile; a profile without an entry
	// has no sourced recommendation.
	Recs map[Profile]Rec
	// Source is shown when no profile recommendation applies (audit-only knobs).
	Source string

	// Read returns the current value of every target. An error means the
	// knob as a whole cannot be read (missing driver, daemon not running).
	Read func(e *Env) ([]Current, error)
	// Judge compares a current value with a recommendation. It returns the
	// status, the value apply would write (want) and a short reason.
	// nil means: equal after whitespace normalisation.
	Judge func(e *Env, cur Current, rec string) (st Status, want, why string)
	// Write sets one target. value is either a want from Judge or a Raw from
	// the journal; absent asks to remove the setting.
	Write func(e *Env, target, value string, absent bool) error
}

var registry []*Knob

// register adds knobs from a family file's init.
func register(ks ...*Knob) { registry = append(registry, ks...) }

// familyOrder keeps the audit in a readable order: CPU first, then the
// stack from the wire up.
var familyOrder = []string{"cpu", "irq", "nic", "mtu", "net.core", "net.ipv4", "conntrack", "ovs", "kube-proxy"}

// Knobs returns every registered knob, grouped by family.
func Knobs() []*Knob {
	rank := map[string]int{}
	for i, f := range familyOrder {
		rank[f] = i
	}
	out := append([]*Knob(nil), registry...)
	sort.SliceStable(out, func(i, j int) bool { return rank[out[i].Family] < rank[out[j].Family] })
	return out
}

// Lookup finds a knob by id.
func Lookup(id string) (*Knob, error) {
	for _, k := range registry {
		if k.ID == id {
			return k, nil
		}
	}
	return nil, fmt.Errorf("unknown knob %q: run `cnibench tune audit` to list knob ids", id)
}

// Select returns the knobs named in ids (all when ids is empty), checking
// every name.
func Select(ids []string) ([]*Knob, error) {
	if len(ids) == 0 {
		return Knobs(), nil
	}
	want := map[string]bool{}
	for _, id := range ids {
		if _, err := Lookup(id); err != nil {
			return nil, err
		}
		want[id] = true
	}
	var out []*Knob
	for _, k := range Knobs() {
		if want[k.ID] {
			out = append(out, k)
		}
	}
	return out, nil
}

// norm collapses runs of whitespace so "4096\t131072" equals "4096 131072".
func norm(s string) string { return strings.Join(strings.Fields(s), " ") }

// readFile reads a small kernel file whole.
func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", explain(err)
	}
	return string(b), nil
}

// writeFile writes a value to a kernel file in one write(2), as sysctl(8)
// does. O_TRUNC is ignored by procfs and sysfs and keeps fixture files exact.
func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return explain(err)
	}
	_, werr := f.Write([]byte(value))
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return cerr
}

// explain turns a missing file into a reason a user can act on, keeping
// errors.Is(err, fs.ErrNotExist) true for callers that branch on it.
func explain(err error) error {
	var pe *os.PathError
	if errors.Is(err, fs.ErrNotExist) && errors.As(err, &pe) {
		return missingError{pe.Path}
	}
	return err
}

// missingError says a file a knob reads does not exist.
type missingError struct{ path string }

func (e missingError) Error() string { return e.path + " does not exist" }
func (e missingError) Unwrap() error { return fs.ErrNotExist }
