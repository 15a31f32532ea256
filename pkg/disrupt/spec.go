package disrupt

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cnibench/cnibench/experiments/disrupt"
	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/yamlfile"
)

// ErrInvalid is matched by every error about a disruption file or flag
// the user can fix.
var ErrInvalid = errors.New("invalid disruption input")

// Duration is a time.Duration written as "200ms" in YAML.
type Duration time.Duration

// UnmarshalYAML reads "200ms", "2s".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration (write 200ms, 2s)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Spec is a disruption experiment: probes kept running on each arm's lab
// while events fire at fixed instants.
type Spec struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Probes run side by side for the whole of each arm.
	Probes []ProbeYAML `yaml:"probes"`
	// Bucket is the timeline's resolution (default 100ms).
	Bucket Duration `yaml:"bucket"`
	// Settle is probe time before the first event: the baseline.
	Settle Duration `yaml:"settle"`
	// Spacing is from one event's start to the next one's; an event's
	// disruption is judged in that window.
	Spacing Duration `yaml:"spacing"`
	// Repeats is how many times the event list fires on each arm.
	Repeats  int         `yaml:"repeats"`
	Events   []EventSpec `yaml:"events"`
	Baseline string      `yaml:"baseline"`
	Arms     []ArmSpec   `yaml:"arms"`

	dir string
	// text is the experiment as Load read it, kept with the result.
	text string
}

// ProbeYAML is one probe of a Spec.
type ProbeYAML struct {
	Kind    ProbeKind `yaml:"kind"`
	Rate    float64   `yaml:"rate"`
	Timeout Duration  `yaml:"timeout"`
}

// EventSpec is one event of a Spec.
type EventSpec struct {
	Kind EventKind `yaml:"kind"`
	// Duration is a blackhole's length.
	Duration Duration `yaml:"duration"`
	// Service is the Service whose endpoint an endpoint-change moves
	// (0-based; default the middle one of the lab's services=N).
	ServiceYAML *int `yaml:"service"`
	// Service is ServiceYAML read: -1 for the middle one, chosen once the
	// arm's N is known.
	Service int `yaml:"-"`
	// Node is the node whose daemon a vswitchd-restart or an
	// ovn-controller-restart restarts (1 or 2; default 2, the server's).
	Node int `yaml:"node"`
}

// ArmSpec is one lab the events fire at.
type ArmSpec struct {
	Name     string            `yaml:"name"`
	Topology string            `yaml:"topology"`
	Knobs    map[string]string `yaml:"knobs"`
	// Server is "server" (the server pod, default) or "service" (the
	// lab's Service VIP, which needs services=N).
	Server string `yaml:"server"`
	// Probes overrides the experiment's probes for this arm.
	Probes []ProbeYAML `yaml:"probes"`

	lab *lab.Spec
}

// Load reads a ready disruption experiment by name or a YAML file.
func Load(ref string) (*Spec, error) {
	var data []byte
	var dir string
	var err error
	if strings.HasSuffix(ref, ".yaml") || strings.Contains(ref, "/") {
		data, err = os.ReadFile(ref)
		dir = filepath.Dir(ref)
	} else {
		data, err = fs.ReadFile(disrupt.Files, ref+".yaml")
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errkind.Errorf(ErrInvalid, "disruption experiment %q: no such ready experiment (ready: %s) and not a .yaml file", ref, strings.Join(Ready(), ", "))
		}
	}
	if err != nil {
		return nil, errkind.Errorf(ErrInvalid, "disruption experiment %s: %v", ref, err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, errkind.Errorf(ErrInvalid, "%s: %v", ref, err)
	}
	s.dir, s.text = dir, string(data)
	if err := s.Check(); err != nil {
		return nil, errkind.Errorf(ErrInvalid, "%s: %v", ref, err)
	}
	return s, nil
}

// Ready lists the ready disruption experiments.
func Ready() []string {
	ents, _ := fs.ReadDir(disrupt.Files, ".")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, n)
		}
	}
	return out
}

// Parse decodes a disruption experiment strictly and fills defaults.
func Parse(data []byte) (*Spec, error) {
	s := &Spec{}
	if err := yamlfile.Decode(data, s, nil); err != nil {
		return nil, err
	}
	s.Bucket = cmp.Or(s.Bucket, Duration(100*time.Millisecond))
	s.Settle = cmp.Or(s.Settle, Duration(time.Second))
	s.Spacing = cmp.Or(s.Spacing, Duration(2*time.Second))
	s.Repeats = cmp.Or(s.Repeats, 1)
	defaultProbes(s.Probes)
	if len(s.Probes) == 0 {
		s.Probes = []ProbeYAML{{Kind: UDPRR}}
		defaultProbes(s.Probes)
	}
	for i := range s.Arms {
		defaultProbes(s.Arms[i].Probes)
		if s.Arms[i].Server == "" {
			s.Arms[i].Server = "server"
		}
	}
	for i := range s.Events {
		if d, ok := restarts[s.Events[i].Kind]; ok && d.PerNode() && s.Events[i].Node == 0 {
			s.Events[i].Node = 2
		}
		s.Events[i].Service = -1
		if v := s.Events[i].ServiceYAML; v != nil {
			s.Events[i].Service = *v
		}
	}
	if s.Baseline == "" && len(s.Arms) > 0 {
		s.Baseline = s.Arms[0].Name
	}
	return s, nil
}

func defaultProbes(ps []ProbeYAML) {
	for i := range ps {
		if ps[i].Rate == 0 {
			ps[i].Rate = DefaultUDPRate
			if ps[i].Kind == TCPCRR {
				ps[i].Rate = DefaultCRRRate
			}
		}
		if ps[i].Timeout == 0 {
			ps[i].Timeout = Duration(DefaultTimeout)
		}
	}
}

// Check refuses what cannot run, before any lab is built.
func (s *Spec) Check() error {
	if s.Name == "" {
		return errors.New("name: missing")
	}
	if len(s.Arms) == 0 {
		return errors.New("arms: none (give at least one {name, topology})")
	}
	if len(s.Events) == 0 {
		return errors.New("events: none (give at least one {kind: blackhole, duration: 200ms})")
	}
	if b := time.Duration(s.Bucket); b < 10*time.Millisecond || b > 10*time.Second {
		return fmt.Errorf("bucket %s: want 10ms to 10s", b)
	}
	if s.Repeats < 1 || s.Repeats > 1000 {
		return fmt.Errorf("repeats %d: want 1 to 1000", s.Repeats)
	}
	check := func(where string, ps []ProbeYAML) error {
		for i, p := range ps {
			if err := (ProbeSpec{Kind: p.Kind, Rate: p.Rate, Timeout: time.Duration(p.Timeout)}).Check(); err != nil {
				return fmt.Errorf("%s[%d]: %v", where, i, err)
			}
			if time.Duration(p.Timeout) >= time.Duration(s.Spacing)/2 {
				return fmt.Errorf("%s[%d]: timeout %s must be under half the spacing (%s)", where, i, time.Duration(p.Timeout), time.Duration(s.Spacing))
			}
		}
		return nil
	}
	if err := check("probes", s.Probes); err != nil {
		return err
	}
	for i, e := range s.Events {
		if !slices.Contains(EventKinds, e.Kind) {
			return fmt.Errorf("events[%d].kind %q: want one of %v", i, e.Kind, EventKinds)
		}
		if e.Kind == Blackhole && (e.Duration <= 0 || e.Duration >= s.Spacing/2) {
			return fmt.Errorf("events[%d].duration %s: a blackhole needs a length above 0 and under half the spacing (%s)", i, time.Duration(e.Duration), time.Duration(s.Spacing))
		}
		if e.Kind != Blackhole && e.Duration != 0 {
			return fmt.Errorf("events[%d].duration: only a blackhole has one", i)
		}
	}
	seen := map[string]bool{}
	for i := range s.Arms {
		a := &s.Arms[i]
		if a.Name == "" || seen[a.Name] {
			return fmt.Errorf("arms[%d].name %q: missing or repeated", i, a.Name)
		}
		seen[a.Name] = true
		if err := check(fmt.Sprintf("arms[%d].probes", i), a.Probes); err != nil {
			return err
		}
		ls, err := lab.Resolve(a.Topology, s.dir, a.Knobs)
		if err != nil {
			return fmt.Errorf("arms[%d] (%s): %v", i, a.Name, err)
		}
		a.lab = ls
		if a.Server != "server" && a.Server != "service" {
			return fmt.Errorf("arms[%d].server %q: want server or service", i, a.Server)
		}
		if a.Server == "service" && ls.Services < 1 {
			return fmt.Errorf("arms[%d].server service: needs knobs {services: N}", i)
		}
		for k, e := range s.Events {
			switch e.Kind {
			case ProxyResync, EndpointChange:
				if ls.Proxy == "" || ls.Services < 2 {
					return fmt.Errorf("arms[%d] (%s): events[%d] %s needs knobs {proxy: iptables|nftables, services: N ≥ 2}", i, a.Name, k, e.Kind)
				}
				if e.Kind == EndpointChange && e.ServiceYAML != nil && (e.Service >= ls.Services-1 || e.Service < 0) {
					return fmt.Errorf("events[%d].service %d: want 0 to %d (the last Service is the probed one)", k, e.Service, ls.Services-2)
				}
				if e.Kind == EndpointChange && ls.Endpoints > 1 {
					return fmt.Errorf("arms[%d] (%s): events[%d] endpoint-change needs endpoints=1", i, a.Name, k)
				}
			case VswitchdRestart, OVNControllerRestart, OVNNorthdRestart, OVNNBRestart, OVNSBRestart:
				if err := lab.CheckRestart(ls, restarts[e.Kind], e.Node); err != nil {
					return fmt.Errorf("arms[%d] (%s): events[%d] %s: %v", i, a.Name, k, e.Kind, err)
				}
			case PolicyReplace:
				if ls.Policies < 1 {
					return fmt.Errorf("arms[%d] (%s): events[%d] policy-replace needs knobs {policies: N}", i, a.Name, k)
				}
			}
		}
	}
	if !seen[s.Baseline] {
		return fmt.Errorf("baseline %q: not an arm", s.Baseline)
	}
	return nil
}

// probes is the arm's probes.
func (s *Spec) probes(a *ArmSpec) []ProbeYAML {
	if len(a.Probes) > 0 {
		return a.Probes
	}
	return s.Probes
}
