// Package lab builds real container datapaths on one Linux host: network
// namespaces for pods and for emulated nodes, joined by veth, Linux bridges,
// macvlan, routed underlays, VXLAN (and GENEVE/IPIP where the kernel has them)
// and Open vSwitch userspace (netdev) bridges, with nftables knobs on the path.
//
// A Spec is pure data (a preset plus knobs); Up turns it into a Lab, whose
// state is a JSON file under StateDir written before anything is created, so
// that Down, or Clean after a crash, can remove everything. All objects are
// named cnb-<id>-<suffix> (package runid) and live inside the lab's own
// namespaces, except what Open vSwitch's userspace datapath needs in the root
// namespace (veth host ends and bridges, also named cnb-<id>-…).
//
// Settings are not objects: every value a lab changes (forwarding in its
// nodes, socket buffer limits — host-wide on most kernels —, OVS's socket
// defaults while it builds, offloads) goes through the lab's pkg/tune
// Journal, whose path the state file records before the first change, and
// Down, Clean and every failed Up roll it back exactly (journal.go).
//
// What the package knows about each preset is one row of the topology
// registry (topologies.go) and about each knob one entry of the knob
// registry (knobs.go); Resolve reads knobs through their entries into a
// typed Spec, which Up builds without checking it again.
package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// StateDir holds one JSON file per lab. A variable so tests can isolate it;
// $CNIBENCH_STATE_DIR moves it (and the private OVS instances) for a whole
// process, which is how the chaos tests keep a killed run's labs apart from
// every other lab on the host.
var StateDir = filepath.Join(stateRoot(), "labs")

// stateRoot is $CNIBENCH_STATE_DIR, or /run/cnibench.
func stateRoot() string {
	if d := os.Getenv("CNIBENCH_STATE_DIR"); d != "" {
		return d
	}
	return "/run/cnibench"
}

// ErrNotSupported is wrapped by errors about a kernel or host that lacks a
// feature a topology needs (e.g. CONFIG_GENEVE). Nothing is left behind.
var ErrNotSupported = errors.New("not supported")

// ErrInvalid is matched (errors.Is) by Up's errors about its input — the
// spec, the lab name, a name already taken — as opposed to the host failing,
// so the CLI can report them as usage errors without reading their text.
var ErrInvalid = errors.New("invalid lab input")

// invalidError keeps the message of err and matches both ErrInvalid and
// whatever err wraps (os.ErrExist for a taken name).
type invalidError struct{ err error }

func (e invalidError) Error() string   { return e.err.Error() }
func (e invalidError) Unwrap() []error { return []error{ErrInvalid, e.err} }

// ErrNoLab is wrapped by Get when no lab has that name.
var ErrNoLab = errors.New("no lab named")

// Endpoint is a place traffic can start or end in a lab.
type Endpoint struct {
	Name  string `json:"name"`  // "client", "server", "node1", "node2", or an extra pod
	Kind  string `json:"kind"`  // "pod" or "node"
	Netns string `json:"netns"` // named namespace; "" = the host's namespace
	IP    string `json:"ip"`    // the endpoint's address (pods: pod IP; nodes: underlay IP)
}

// Lab is a built topology, and its state file.
type Lab struct {
	Name      string              `json:"name"`
	ID        string              `json:"id"`
	Preset    string              `json:"preset"`
	Spec      *Spec               `json:"spec"`
	Knobs     map[string]string   `json:"knobs,omitempty"`
	Endpoints map[string]Endpoint `json:"endpoints"`
	// ServiceIP is the service VIP that DNATs to the server pod (services=N).
	ServiceIP string `json:"service_ip,omitempty"`
	// PodMTU is the MTU of the pods' interfaces.
	PodMTU int `json:"pod_mtu,omitempty"`
	// Pods counts all pods, client and server included.
	Pods int `json:"pods"`

	// What exists or may exist on the host; teardown removes exactly this.
	Namespaces []string `json:"namespaces"`
	HostLinks  []string `json:"host_links,omitempty"`  // links in the root namespace
	OVSBridges []string `json:"ovs_bridges,omitempty"` // OVS bridges
	StartedOVS bool     `json:"started_ovs,omitempty"` // we started the host's ovsdb-server/ovs-vswitchd
	PrivateOVS []string `json:"private_ovs,omitempty"` // run dirs of per-node OVS instances
	// Daemons are the private OVS and OVN daemons the lab started, with
	// their pids: Health names one that exited.
	Daemons []Daemon `json:"daemons,omitempty"`
	// Journal is the pkg/tune journal of every setting the lab changed
	// (sysctls on the host and in its namespaces, offloads), each written
	// there with its old value before the change; Down rolls it back.
	// Empty until the lab's first change.
	Journal string `json:"journal,omitempty"`

	Created  time.Time `json:"created"`
	PID      int       `json:"pid"`      // the process that ran Up
	Complete bool      `json:"complete"` // Up finished
	UpTime   string    `json:"up_time,omitempty"`
}

// Endpoint returns a named endpoint or an error listing the endpoints.
func (l *Lab) Endpoint(name string) (Endpoint, error) {
	if e, ok := l.Endpoints[name]; ok {
		return e, nil
	}
	return Endpoint{}, fmt.Errorf("lab %s has no endpoint %q (endpoints: %s)", l.Name, name, strings.Join(l.EndpointNames(), ", "))
}

// EndpointNames returns the endpoint names: client, server, nodes, then other pods.
func (l *Lab) EndpointNames() []string {
	first := []string{"client", "server", "node1", "node2"}
	pos := func(name string) int {
		if i := slices.Index(first, name); i >= 0 {
			return i
		}
		return len(first)
	}
	out := slices.Collect(maps.Keys(l.Endpoints))
	sort.Slice(out, func(i, j int) bool {
		if pi, pj := pos(out[i]), pos(out[j]); pi != pj {
			return pi < pj
		}
		return naturalLess(out[i], out[j])
	})
	return out
}

// State is "up" for a finished lab, "building" while the process running
// Up is alive, and "incomplete" when that process died mid-way (run
// `cnibench lab down` or `lab clean`).
func (l *Lab) State() string {
	switch {
	case l.Complete:
		return "up"
	case l.PID > 0 && l.PID != os.Getpid() && procAlive(l.PID):
		return "building"
	case l.PID == os.Getpid():
		return "building"
	}
	return "incomplete"
}

func statePath(name string) string { return filepath.Join(StateDir, name+".json") }

// save writes the state file atomically and durably: it is the journal that
// lets a later Down or Clean find what this lab created.
func (l *Lab) save() error {
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return fmt.Errorf("lab state dir: %w", err)
	}
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(l.Name) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write lab state: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write lab state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write lab state: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(l.Name))
}

// Get reads a lab's state.
func Get(name string) (*Lab, error) {
	data, err := os.ReadFile(statePath(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w %q (see `cnibench lab list`)", ErrNoLab, name)
	}
	if err != nil {
		return nil, err
	}
	var l Lab
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("lab %s: corrupt state file %s: %v (remove it with `cnibench lab clean`)", name, statePath(name), err)
	}
	return &l, nil
}

// List returns every lab with a readable state file, sorted by name, and an
// error for each unreadable one.
func List() ([]*Lab, error) {
	ents, err := os.ReadDir(StateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Lab
	var errs []error
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Size() == 0 {
			continue // a name reserved by an `up` that has not written its state yet
		}
		l, err := Get(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// Down removes everything the lab created and its state file. Objects that
// are already gone are not errors, so Down is idempotent.
func (l *Lab) Down(ctx context.Context) error {
	err := l.teardown(ctx)
	if err != nil {
		return fmt.Errorf("lab %s down: %w", l.Name, err)
	}
	if rerr := os.Remove(statePath(l.Name)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		return rerr
	}
	_ = os.Remove(statePath(l.Name) + ".tmp")
	if l.Journal != "" {
		// Rolled back: the lab and its record go together.
		_ = os.Remove(l.Journal)
	}
	return nil
}

// naturalLess orders "pod1-2" before "pod1-10".
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da != "" && db != "" {
			if len(da) != len(db) {
				return len(da) < len(db)
			}
			if da != db {
				return da < db
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitsPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
