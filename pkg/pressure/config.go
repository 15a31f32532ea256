// Package pressure drives a datapath to its breaking point: it holds N
// established flows through a lab (each pinged now and then, so it stays
// live in every conntrack table on the path), ramps the rate of new
// connections step by step, finds the knee — the first step where
// connections time out, are refused or fall behind the offered rate — and
// names its cause from the datapath's own counters (conntrack count against
// nf_conntrack_max, insert_failed, drop, early_drop; SYN retransmits,
// listen overflows), or says the client or the host's CPUs were the limit.
package pressure

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cnibench/cnibench/pkg/yamlfile"
)

// ErrInvalid is wrapped by every error about a pressure block's values.
var ErrInvalid = errors.New("invalid pressure block")

// Config is an experiment's `pressure:` block: what each ramp holds and
// offers. Parse once (yamlfile), then Check and Defaults.
type Config struct {
	// Flows are the held flows; each value is one ramp per arm. Default [0].
	Flows []int `yaml:"flows"`
	// Rates are the new-connection rates (connections per second) of the
	// steps, ascending. Required.
	Rates []int `yaml:"rates"`
	// Step is how long each rate is offered (default 2s).
	Step Duration `yaml:"step"`
	// ConnectTimeout is how long a new connection may take to be answered
	// before it counts as timed out (default 1s: a dropped SYN is only
	// sent again after 1 s, so any drop on the handshake shows).
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// HoldPing is how often each held flow is pinged (default 5s).
	HoldPing Duration `yaml:"hold_ping"`
	// MaxInflight caps the new connections in flight (default 4096); a
	// step that reaches it says so (capped): the client was the limit.
	MaxInflight int `yaml:"max_inflight"`
	// FailShare is the share of a step's connections that may fail before
	// the step is the knee (default 1%).
	FailShare float64 `yaml:"fail_share"`
	// Sources is how many source addresses the client uses (default 4,
	// at most 32): each gives about 32,000 distinct 4-tuples to the
	// server's port, so the client's tuples outnumber the table (sources.go).
	Sources int `yaml:"sources"`
	// Repeats runs every ramp this many times, arms interleaved (default 1).
	Repeats int `yaml:"repeats"`
}

// Duration is a time.Duration written as "2s" or "500ms".
type Duration time.Duration

// UnmarshalYAML reads "2s", "500ms".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := yamlfile.Duration(n, "2s, 500ms")
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Bounds of the values. The client's ports are the reason for the sum
// bound: the run opens its source ports 1024..65535 in the client's
// namespace, and held flows plus connections in flight must fit, so that
// the client, not the datapath, is never out of ports.
const (
	MaxFlows      = 50000
	MaxRate       = 200000
	clientPorts   = 65535 - 1024 + 1
	portsReserved = 1024 // ports the server's TIME_WAIT clashes may take
	maxRepeats    = 20
	maxSources    = 32
)

// WithDefaults returns c with the defaults filled in.
func (c Config) WithDefaults() Config {
	if len(c.Flows) == 0 {
		c.Flows = []int{0}
	}
	c.Step = cmp.Or(c.Step, Duration(2*time.Second))
	c.ConnectTimeout = cmp.Or(c.ConnectTimeout, Duration(time.Second))
	c.HoldPing = cmp.Or(c.HoldPing, Duration(5*time.Second))
	c.MaxInflight = cmp.Or(c.MaxInflight, 4096)
	c.FailShare = cmp.Or(c.FailShare, 0.01)
	c.Repeats = cmp.Or(c.Repeats, 1)
	c.Sources = cmp.Or(c.Sources, 4)
	return c
}

// Check says what is wrong with a block (defaults filled in), naming the
// field and what it takes.
func (c Config) Check() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(f, a...)) }
	if len(c.Rates) == 0 {
		return bad("pressure.rates: required, e.g. [1000, 2000, 4000] (new connections per second)")
	}
	for i, r := range c.Rates {
		if r < 1 || r > MaxRate {
			return bad("pressure.rates[%d]: %d: want 1..%d connections per second", i, r, MaxRate)
		}
		if i > 0 && r <= c.Rates[i-1] {
			return bad("pressure.rates[%d]: %d: rates must ascend (a ramp)", i, r)
		}
	}
	for i, f := range c.Flows {
		if f < 0 || f > MaxFlows {
			return bad("pressure.flows[%d]: %d: want 0..%d held flows", i, f, MaxFlows)
		}
	}
	if c.Step < Duration(100*time.Millisecond) || c.Step > Duration(time.Minute) {
		return bad("pressure.step: %v: want 100ms..1m", time.Duration(c.Step))
	}
	if c.ConnectTimeout < Duration(100*time.Millisecond) || c.ConnectTimeout > Duration(30*time.Second) {
		return bad("pressure.connect_timeout: %v: want 100ms..30s", time.Duration(c.ConnectTimeout))
	}
	if c.HoldPing < Duration(100*time.Millisecond) || c.HoldPing > Duration(10*time.Minute) {
		return bad("pressure.hold_ping: %v: want 100ms..10m", time.Duration(c.HoldPing))
	}
	if c.MaxInflight < 1 {
		return bad("pressure.max_inflight: %d: want at least 1", c.MaxInflight)
	}
	if most := slices.Max(c.Flows); most+c.MaxInflight > clientPorts-portsReserved {
		return bad("pressure: flows %d + max_inflight %d: more than the client's %d source ports; lower one of them", most, c.MaxInflight, clientPorts-portsReserved)
	}
	if c.FailShare <= 0 || c.FailShare >= 1 {
		return bad("pressure.fail_share: %g: want a fraction between 0 and 1, e.g. 0.01", c.FailShare)
	}
	if c.Sources < 1 || c.Sources > maxSources {
		return bad("pressure.sources: %d: want 1..%d client source addresses", c.Sources, maxSources)
	}
	if c.Repeats < 1 || c.Repeats > maxRepeats {
		return bad("pressure.repeats: %d: want 1..%d", c.Repeats, maxRepeats)
	}
	return nil
}
