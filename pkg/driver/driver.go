// Package driver puts every way of measuring a path — the built-in engine and
// the reference tools qperf, iperf3 and sockperf — behind one interface, so
// experiments, crosschecks and `cnibench client --engine` treat them alike.
//
// A driver only builds command lines and parses output. Running the commands
// (in which network namespace, with which timeout, killing by PID on failure)
// is the caller's job, which keeps drivers pure and testable on golden files.
package driver

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
)

// Spec is one measurement asked of any engine.
type Spec struct {
	Server   string        // server address (IP or host), without port
	Port     int           // 0 means the tool's own default
	Test     string        // one of result.Tests
	MsgSize  int           // bytes
	Duration time.Duration // measured interval
	Warmup   time.Duration
	Parallel int     // streams/connections; 0 or 1 means one
	RateBps  float64 // udp_bw send rate in bits/s; 0 means unlimited
	// ClientCPU and ServerCPU pin the client's and server's processes
	// (every thread they start) to one CPU; nil leaves them unpinned.
	ClientCPU, ServerCPU *int
	// Persistent asks ServerCommand for a server that serves one client
	// after another until stopped (see Serve), instead of one that may exit
	// after its measurement (iperf3 -1).
	Persistent bool
}

// CheckSpec verifies that d can run spec as written, without running
// anything: d has the test, and builds a client command — and, with
// server, a server command — for it. That is where a tool's own limits
// live (sockperf's 14-byte and iperf3's 16-byte minimums, qperf's whole
// seconds). Experiments and `k8s run` check every test and size with it
// before anything is created.
func CheckSpec(d Driver, spec Spec, server bool) error {
	if err := d.Supports(spec.Test); err != nil {
		return err
	}
	if _, err := d.ClientCommand(spec); err != nil {
		return err
	}
	if server {
		if _, err := d.ServerCommand(spec); err != nil {
			return err
		}
	}
	return nil
}

// Driver builds commands for one tool and parses what they print.
type Driver interface {
	// Name is the engine name used in experiment files and --engine.
	Name() string
	// Supports returns nil, or an error naming the tool and the test it lacks
	// (e.g. "qperf has no tcp_crr test; use engine builtin").
	Supports(test string) error
	// Installed returns nil, or an error telling how to install the tool
	// (e.g. "qperf is not installed: apt-get install qperf").
	Installed() error
	// ServerCommand is the argv that serves spec on the server side.
	ServerCommand(spec Spec) ([]string, error)
	// ClientCommand is the argv that measures spec from the client side.
	ClientCommand(spec Spec) ([]string, error)
	// Parse turns the client's standard output into a result. A value that
	// does not parse is an error or a null with a reason, never 0.
	Parse(spec Spec, stdout []byte) (*result.Result, error)
	// Version returns the tool's version string, or an error.
	Version() (string, error)
}

var (
	mu      sync.Mutex
	drivers = map[string]Driver{}
)

// Register makes a driver available by name. Called from driver packages' init.
func Register(d Driver) {
	mu.Lock()
	defer mu.Unlock()
	drivers[d.Name()] = d
}

// Lookup returns the named driver.
func Lookup(name string) (Driver, error) {
	mu.Lock()
	defer mu.Unlock()
	d, ok := drivers[name]
	if !ok {
		return nil, fmt.Errorf("unknown engine %q (known: %v)", name, namesLocked())
	}
	return d, nil
}

// Names lists the registered engines, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	return namesLocked()
}

func namesLocked() []string {
	n := make([]string, 0, len(drivers))
	for k := range drivers {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
