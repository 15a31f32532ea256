// Package experiment reads experiment files, plans a matrix of arms × tests ×
// message sizes × repeats in an interleaved order, and runs it: it builds each
// arm's lab topology, measures every step with the arm's engine, stores each
// sample as it finishes and tears every lab down, also when interrupted.
package experiment

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/pressure"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/units"
	"github.com/cnibench/cnibench/pkg/yamlfile"
)

// Experiment is a parsed experiment file.
type Experiment struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Source names the seed document table this experiment reproduces.
	Source   string   `yaml:"source"`
	Tests    []string `yaml:"tests"`
	MsgSizes []Size   `yaml:"msg_sizes"`
	// TestSizes gives a test its own sizes instead of msg_sizes, e.g.
	// {tcp_bw: [64K]} beside msg_sizes [1] for the latency tests.
	TestSizes map[string][]Size `yaml:"test_sizes"`
	Duration  Duration          `yaml:"duration"`
	Warmup    Duration          `yaml:"warmup"`
	Repeats   int               `yaml:"repeats"`
	// Precision, when set, makes the run precision-driven: after Repeats
	// interleaved rounds, more rounds run for the cells whose median's 95%
	// confidence interval is still wider than ±Precision of the median,
	// until every cell meets it or Budget is spent (see refine.go).
	Precision Percent  `yaml:"precision"`
	Budget    Duration `yaml:"budget"`
	// Wakeup is the wake-up policy while measuring: auto (default: hold
	// for request/response tests, none for streams; wakeup.ForTest), spin,
	// hold or none. CPUs pins the client and server: auto (default: the
	// last two CPUs, DefaultPlacement), none or client=N,server=M. Both are
	// recorded with every sample.
	Wakeup string `yaml:"wakeup"`
	CPUs   string `yaml:"cpus"`
	// RetakeDisturbed measures each step taken on a disturbed machine once
	// more after the planned rounds (see Options.RetakeDisturbed).
	RetakeDisturbed bool `yaml:"retake_disturbed"`
	// Order is "interleaved" (default: A B C A B C …, so drift spreads over
	// all arms) or "sequential" (A A A B B B …, for comparison only).
	Order    string `yaml:"order"`
	Baseline string `yaml:"baseline"`
	Engine   string `yaml:"engine"`
	Parallel int    `yaml:"parallel"`
	// Rate limits udp_bw senders, e.g. "1G"; empty or "0" is unlimited.
	Rate string `yaml:"rate"`
	Arms []Arm  `yaml:"arms"`
	// Pressure, when set, is what `cnibench pressure` ramps on the arms:
	// held flows and new-connection rates up to the datapath's knee
	// (pkg/pressure, docs/pressure.md). `cnibench run` leaves it alone.
	Pressure *pressure.Config `yaml:"pressure"`

	// Text is the file as read, stored with the run.
	Text string `yaml:"-"`
	// Dir resolves topology files named relative to the experiment file.
	Dir string `yaml:"-"`
	// RateBps is Rate parsed.
	RateBps float64 `yaml:"-"`
}

// Arm is one row of the resulting table: a datapath and how it is measured.
type Arm struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Topology is a lab preset name or a lab YAML file.
	Topology string            `yaml:"topology"`
	Knobs    map[string]string `yaml:"knobs"`
	// Client and Server name the lab endpoints to measure between
	// (default "client" and "server"; "node1"/"node2" give the HOST row).
	Client string `yaml:"client"`
	Server string `yaml:"server"`
	// Engine overrides the experiment's engine for this arm.
	Engine string `yaml:"engine"`
	// ServerAddress measures a cnibench server that is already running
	// elsewhere instead of building a lab; the client runs in this namespace.
	ServerAddress string `yaml:"server_address"`
	// Tests restricts the arm to some of the experiment's tests.
	Tests []string `yaml:"tests"`
	// Wakeup and CPUs override the experiment's for this arm.
	Wakeup string `yaml:"wakeup"`
	CPUs   string `yaml:"cpus"`

	line int `yaml:"-"` // where the arm starts in its file, for Check's errors
	// lab is the arm's topology with its knobs as Check resolved them: the
	// run builds it without reading the knobs again.
	lab *lab.Spec
}

// Size is a message size in bytes, written as 1, 64, 1K, 4K in YAML.
type Size int

// UnmarshalYAML accepts a number or a string with a K/M/G suffix.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := units.ParseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*s = Size(v)
	return nil
}

// Duration is a time.Duration written as "3s" or "500ms" in YAML.
type Duration time.Duration

// Percent is a fraction written as "5%" (or 0.05).
type Percent float64

// UnmarshalYAML accepts "5%", "5 %" or a fraction such as 0.05.
func (p *Percent) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParsePercent(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*p = Percent(v)
	return nil
}

// ParsePercent parses "5%" or "0.05" into 0.05.
func ParsePercent(s string) (float64, error) {
	t := strings.TrimSpace(s)
	div := 1.0
	if strings.HasSuffix(t, "%") {
		t, div = strings.TrimSpace(strings.TrimSuffix(t, "%")), 100
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bad percentage %q: want e.g. 5%%", s)
	}
	return v / div, nil
}

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := yamlfile.Duration(n, "3s, 500ms, 1m")
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Defaults for fields an experiment file leaves out.
const (
	DefaultRepeats  = 5
	DefaultDuration = 3 * time.Second
	DefaultWarmup   = 1 * time.Second
	DefaultEngine   = "builtin"
	// MaxRepeats bounds repeats so that a typo (repeats: 1000000000) is an
	// error at parse time rather than a plan that exhausts memory.
	MaxRepeats = 10000
)

// LoadFile reads and validates an experiment file; topology files named in
// it are resolved against the file's folder.
func LoadFile(path string) (*Experiment, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read experiment: %w", err)
	}
	return ParseIn(b, path, filepath.Dir(path))
}

// Parse decodes and checks an experiment whose topology files (if any) are
// named relative to the working directory. See ParseIn.
func Parse(b []byte, name string) (*Experiment, error) { return ParseIn(b, name, "") }

// ParseIn decodes an experiment strictly — unknown fields and bad values are
// errors that name the file, the field and what is allowed — and checks that
// every arm can run (Check), resolving topology files against dir. Every
// error wraps ErrInvalid.
func ParseIn(b []byte, name, dir string) (*Experiment, error) {
	var e Experiment
	if err := yamlfile.Decode(b, &e, nil); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, name, err)
	}
	e.Text, e.Dir = string(b), dir
	armLines(b, e.Arms)
	if err := e.normalize(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, name, err)
	}
	if err := e.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &e, nil
}

// armLines records the line each arm starts on. It reads the document a
// second time as a node tree because a custom UnmarshalYAML on Arm would
// decode without the strict field check.
func armLines(b []byte, arms []Arm) {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 {
		return
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "arms" {
			continue
		}
		for j, n := range root.Content[i+1].Content {
			if j < len(arms) {
				arms[j].line = n.Line
			}
		}
	}
}

func (e *Experiment) normalize() error {
	if e.Name == "" {
		return fmt.Errorf("field name: required")
	}
	if len(e.Tests) == 0 {
		return fmt.Errorf("field tests: required (allowed: %s)", strings.Join(result.Tests, ", "))
	}
	for _, t := range e.Tests {
		if !result.ValidTest(t) {
			return fmt.Errorf("field tests: unknown test %q (allowed: %s)", t, strings.Join(result.Tests, ", "))
		}
	}
	if len(e.MsgSizes) == 0 {
		e.MsgSizes = []Size{1}
	}
	if e.Pressure != nil {
		c := e.Pressure.WithDefaults()
		if err := c.Check(); err != nil {
			return err
		}
		e.Pressure = &c
	}
	for t, sizes := range e.TestSizes {
		if !contains(e.Tests, t) {
			return fmt.Errorf("field test_sizes: %q is not one of the experiment's tests (%s)", t, strings.Join(e.Tests, ", "))
		}
		if len(sizes) == 0 {
			return fmt.Errorf("field test_sizes: %s has no sizes", t)
		}
	}
	// Each (test, size) is checked once, by Check, against the limits of
	// the engine that will run it (pkg/limits and the tools' own).
	if e.Duration == 0 {
		e.Duration = Duration(DefaultDuration)
	}
	if e.Duration < 0 || time.Duration(e.Duration) < 100*time.Millisecond {
		return fmt.Errorf("field duration: %v is too short (want ≥ 100ms)", time.Duration(e.Duration))
	}
	if e.Warmup < 0 {
		return fmt.Errorf("field warmup: must not be negative")
	}
	if e.Repeats == 0 {
		e.Repeats = DefaultRepeats
	}
	if e.Repeats < 1 || e.Repeats > MaxRepeats {
		return fmt.Errorf("field repeats: %d (want 1-%d)", e.Repeats, MaxRepeats)
	}
	if err := e.checkPrecision(); err != nil {
		return err
	}
	if err := e.checkConditions(); err != nil {
		return err
	}
	switch e.Order {
	case "":
		e.Order = "interleaved"
	case "interleaved", "sequential":
	default:
		return fmt.Errorf("field order: %q (allowed: interleaved, sequential)", e.Order)
	}
	if e.Engine == "" {
		e.Engine = DefaultEngine
	}
	if e.Parallel < 0 {
		return fmt.Errorf("field parallel: %d (want ≥ 1)", e.Parallel)
	}
	if e.Rate != "" {
		r, err := units.ParseRate(e.Rate)
		if err != nil {
			return fmt.Errorf("field rate: %v", err)
		}
		e.RateBps = r
	}
	if len(e.Arms) == 0 {
		return fmt.Errorf("field arms: at least one arm is required")
	}
	seen := map[string]bool{}
	for i := range e.Arms {
		a := &e.Arms[i]
		if a.Name == "" {
			return fmt.Errorf("arms[%d]: field name: required", i)
		}
		if seen[a.Name] {
			return fmt.Errorf("arms[%d]: duplicate arm name %q", i, a.Name)
		}
		seen[a.Name] = true
		if (a.Topology == "") == (a.ServerAddress == "") {
			return fmt.Errorf("arm %q: set exactly one of topology (a lab preset or file) and server_address", a.Name)
		}
		if a.ServerAddress != "" && len(a.Knobs) > 0 {
			return fmt.Errorf("arm %q: knobs apply to lab topologies, not to a server_address", a.Name)
		}
		if a.Client == "" {
			a.Client = "client"
		}
		if a.Server == "" {
			a.Server = "server"
		}
		if a.Engine == "" {
			a.Engine = e.Engine
		}
		for _, t := range a.Tests {
			if !contains(e.Tests, t) {
				return fmt.Errorf("arm %q: field tests: %q is not one of the experiment's tests (%s)", a.Name, t, strings.Join(e.Tests, ", "))
			}
		}
	}
	if e.Baseline != "" && !seen[e.Baseline] {
		names := make([]string, 0, len(seen))
		for n := range seen {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("field baseline: %q is not an arm (arms: %s)", e.Baseline, strings.Join(names, ", "))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ArmTests returns the tests an arm runs.
func (e *Experiment) ArmTests(a *Arm) []string {
	if len(a.Tests) > 0 {
		return a.Tests
	}
	return e.Tests
}

// LabKey identifies the lab an arm needs, so arms that share a topology and
// knobs (e.g. the pod and node rows of one overlay) share one lab instance.
func (a *Arm) LabKey() string {
	if a.Topology == "" {
		return ""
	}
	keys := make([]string, 0, len(a.Knobs))
	for k := range a.Knobs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(a.Topology)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, a.Knobs[k])
	}
	return b.String()
}

// Sizes returns the message sizes test runs at: its test_sizes entry if it
// has one, msg_sizes otherwise.
func (e *Experiment) Sizes(test string) []Size {
	if s, ok := e.TestSizes[test]; ok {
		return s
	}
	return e.MsgSizes
}

// MaxPrecision is the widest precision target accepted: beyond ±50% of the
// median an interval says little.
const MaxPrecision = 0.5

// DefaultBudget bounds a precision-driven run's extra rounds when the file
// gives no budget.
const DefaultBudget = 10 * time.Minute

// checkPrecision validates precision and budget: a precision in (0, 50%],
// a budget only with a precision, and a budget that fits one round.
func (e *Experiment) checkPrecision() error {
	p := float64(e.Precision)
	if p == 0 {
		if e.Budget != 0 {
			return fmt.Errorf("field budget: only meaningful with precision (e.g. precision: 5%%)")
		}
		return nil
	}
	if p < 0 || p > MaxPrecision || math.IsNaN(p) {
		return fmt.Errorf("field precision: %.4g%% (want more than 0%% and at most %.0f%%)", p*100, MaxPrecision*100)
	}
	if e.Budget < 0 {
		return fmt.Errorf("field budget: must not be negative")
	}
	if e.Budget == 0 {
		e.Budget = Duration(DefaultBudget)
	}
	if round := e.roundTime(); time.Duration(e.Budget) < round {
		return fmt.Errorf("field budget: %v is shorter than one round of the experiment (%v: %d steps of about %v); give more budget or fewer arms and tests",
			time.Duration(e.Budget), round, e.roundSteps(), e.stepTime())
	}
	return nil
}

// roundSteps counts the steps of one interleaved round (every cell once).
func (e *Experiment) roundSteps() int { return len(e.Plan()) / max(1, e.Repeats) }

// roundTime estimates one round's wall time.
func (e *Experiment) roundTime() time.Duration {
	return time.Duration(e.roundSteps()) * e.stepTime()
}
