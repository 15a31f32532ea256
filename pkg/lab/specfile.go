package lab

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/yamlfile"
	"gopkg.in/yaml.v3"
)

// specFile is the YAML form of a topology:
//
//	topology: bridge       # one of Presets()
//	nodes: 2               # bridge only
//	pods_per_node: 50
//	knobs:                 # the same keys as --set
//	  mtu: 1450
//	  conntrack: on
type specFile struct {
	Topology    string               `yaml:"topology"`
	Nodes       *int                 `yaml:"nodes"`
	PodsPerNode *int                 `yaml:"pods_per_node"`
	Knobs       map[string]yaml.Node `yaml:"knobs"`
}

var fieldHelp = map[string]string{
	"topology":      "a preset name: " + strings.Join(Presets(), ", "),
	"nodes":         knobHelp("nodes"),
	"pods_per_node": knobHelp("pods_per_node"),
	"knobs":         "a map of knob: value; knobs: " + strings.Join(KnobNames(), ", "),
}

// LoadSpecFile reads a topology from a YAML file, strictly: unknown fields
// and bad values are errors naming the file, the field and what is allowed.
func LoadSpecFile(path string) (*Spec, error) { return loadSpec(path, path, nil) }

// readSpecFile reads a topology file into a spec that is not finished.
func readSpecFile(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read topology file: %w", err)
	}
	s, err := parseSpec(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseSpec parses the YAML form of a topology (see LoadSpecFile).
func ParseSpec(data []byte) (*Spec, error) {
	s, err := parseSpec(data)
	if err != nil {
		return nil, invalidError{err}
	}
	return complete(s, "", "", nil)
}

// parseSpec reads a topology file's preset and knobs into a spec that is
// not finished: Resolve may set more knobs before the whole is checked.
func parseSpec(data []byte) (*Spec, error) {
	var f specFile
	err := yamlfile.Decode(data, &f, func(path string) string { return fieldHelp[path] })
	if errors.Is(err, yamlfile.ErrEmpty) {
		return nil, fmt.Errorf("empty topology file (want at least: topology: <%s>)", strings.Join(Presets(), "|"))
	}
	if err != nil {
		return nil, err
	}
	if f.Topology == "" {
		return nil, fmt.Errorf("field topology: missing (allowed: %s)", strings.Join(Presets(), ", "))
	}
	t, err := lookupTopology(f.Topology)
	if err != nil {
		return nil, fmt.Errorf("field topology: unknown %q (allowed: %s)", f.Topology, strings.Join(Presets(), ", "))
	}
	s := t.defaults()
	if f.Nodes != nil {
		if err := s.setKnob("nodes", strconv.Itoa(*f.Nodes)); err != nil {
			return nil, fmt.Errorf("field nodes: %w", err)
		}
	}
	if f.PodsPerNode != nil {
		if err := s.setKnob("pods_per_node", strconv.Itoa(*f.PodsPerNode)); err != nil {
			return nil, fmt.Errorf("field pods_per_node: %w", err)
		}
	}
	keys := slices.Sorted(maps.Keys(f.Knobs))
	for _, k := range keys {
		n := f.Knobs[k]
		if n.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: field knobs.%s: want a scalar value (allowed: %s)", n.Line, k, knobHelp(k))
		}
		if k == "nodes" || k == "pods_per_node" {
			return nil, fmt.Errorf("line %d: field knobs.%s: put %s at the top level, not under knobs", n.Line, k, k)
		}
		if err := s.setKnob(k, n.Value); err != nil {
			return nil, fmt.Errorf("line %d: field knobs.%s: %w", n.Line, k, err)
		}
	}
	return s, nil
}

// Resolve turns a topology (a preset name, or a topology file resolved
// against dir) and knobs into a complete, checked spec: each knob's text is
// read once, through its registry entry, in a stable order, then the whole
// spec is checked. It touches nothing on the host, so an experiment is
// checked with it before anything is stored or built, and Up builds what
// it returns without checking it again. Its errors match ErrInvalid.
func Resolve(topology, dir string, knobs map[string]string) (*Spec, error) {
	if strings.HasSuffix(topology, ".yaml") || strings.HasSuffix(topology, ".yml") || strings.Contains(topology, "/") {
		path := topology
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		return loadSpec(path, topology, knobs)
	}
	t, err := lookupTopology(topology)
	if err != nil {
		return nil, invalidError{err}
	}
	return complete(t.defaults(), topology, "", knobs)
}

// loadSpec is Resolve of the topology file at path (source as given).
func loadSpec(path, source string, knobs map[string]string) (*Spec, error) {
	s, err := readSpecFile(path)
	if err != nil {
		return nil, invalidError{err}
	}
	return complete(s, source, path, knobs)
}

// complete sets knobs on s in a stable order, then checks the whole spec
// (a file's errors named by file).
func complete(s *Spec, source, file string, knobs map[string]string) (*Spec, error) {
	for _, k := range slices.Sorted(maps.Keys(knobs)) {
		if err := s.setKnob(k, knobs[k]); err != nil {
			return nil, invalidError{err}
		}
	}
	s.source = source
	if err := s.finish(); err != nil {
		if file != "" {
			err = fmt.Errorf("%s: %w", file, err)
		}
		return nil, invalidError{err}
	}
	return s, nil
}

// EndpointNames lists the endpoints a lab built from s will have (client,
// server, node1, …), without building it.
func (s *Spec) EndpointNames() []string {
	l := plan(s, "chck", "check")
	names := slices.Sorted(maps.Keys(l.Endpoints))
	return names
}
