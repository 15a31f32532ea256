package lab

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

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

var specFileFields = []string{"topology", "nodes", "pods_per_node", "knobs"}

var lineRE = regexp.MustCompile(`^line (\d+):`)

var fieldHelp = map[string]string{
	"topology":      "a preset name: " + strings.Join(presetOrder, ", "),
	"nodes":         knobHelp["nodes"],
	"pods_per_node": knobHelp["pods_per_node"],
	"knobs":         "a map of knob: value; knobs: " + strings.Join(KnobNames(), ", "),
}

// fieldAtLine finds the top-level field whose value starts on line, to
// name it in a type error (yaml.v3 reports only the line).
func fieldAtLine(data []byte, line string) (field, value string) {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return "", ""
	}
	m := doc.Content[0].Content
	for i := 0; i+1 < len(m); i += 2 {
		if v := m[i+1]; fmt.Sprint(v.Line) == line {
			switch v.Kind {
			case yaml.SequenceNode:
				return m[i].Value, "a list"
			case yaml.MappingNode:
				return m[i].Value, "a map"
			}
			return m[i].Value, strconv.Quote(v.Value)
		}
	}
	return "", ""
}

var unknownFieldRE = regexp.MustCompile(`line (\d+): field (\S+) not found`)

// LoadSpecFile reads a topology from a YAML file, strictly: unknown fields
// and bad values are errors naming the file, the field and what is allowed.
func LoadSpecFile(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read topology file: %w", err)
	}
	s, err := ParseSpec(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseSpec parses the YAML form of a topology (see LoadSpecFile).
func ParseSpec(data []byte) (*Spec, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f specFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("empty topology file (want at least: topology: <%s>)", strings.Join(presetOrder, "|"))
		}
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			msg := te.Errors[0]
			if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
				return nil, fmt.Errorf("line %s: unknown field %q (allowed: %s)", m[1], m[2], strings.Join(specFileFields, ", "))
			}
			if m := lineRE.FindStringSubmatch(msg); m != nil {
				if field, val := fieldAtLine(data, m[1]); field != "" {
					return nil, fmt.Errorf("line %s: field %s: bad value %s (allowed: %s)", m[1], field, val, fieldHelp[field])
				}
			}
			return nil, fmt.Errorf("%s (fields: topology: preset name, nodes: 1|2, pods_per_node: integer, knobs: map)", msg)
		}
		return nil, fmt.Errorf("bad YAML: %v", err)
	}
	if f.Topology == "" {
		return nil, fmt.Errorf("field topology: missing (allowed: %s)", strings.Join(presetOrder, ", "))
	}
	s, err := Preset(f.Topology)
	if err != nil {
		return nil, fmt.Errorf("field topology: unknown %q (allowed: %s)", f.Topology, strings.Join(presetOrder, ", "))
	}
	if f.Nodes != nil {
		if err := s.Set("nodes", fmt.Sprint(*f.Nodes)); err != nil {
			return nil, fmt.Errorf("field nodes: %w", err)
		}
	}
	if f.PodsPerNode != nil {
		if err := s.Set("pods_per_node", fmt.Sprint(*f.PodsPerNode)); err != nil {
			return nil, fmt.Errorf("field pods_per_node: %w", err)
		}
	}
	keys := slices.Sorted(maps.Keys(f.Knobs))
	for _, k := range keys {
		n := f.Knobs[k]
		if n.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: field knobs.%s: want a scalar value (allowed: %s)", n.Line, k, knobHelpOr(k))
		}
		if k == "nodes" || k == "pods_per_node" {
			return nil, fmt.Errorf("line %d: field knobs.%s: put %s at the top level, not under knobs", n.Line, k, k)
		}
		if err := s.Set(k, n.Value); err != nil {
			return nil, fmt.Errorf("line %d: field knobs.%s: %w", n.Line, k, err)
		}
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func knobHelpOr(k string) string {
	if h, ok := knobHelp[k]; ok {
		return h
	}
	return "knobs: " + strings.Join(KnobNames(), ", ")
}

// Resolve turns an experiment arm's topology (a preset name, or a topology
// file resolved against dir) and knobs into a complete, validated spec,
// applying the knobs in a stable order. It touches nothing on the host, so
// an experiment is checked with it before anything is stored or built.
func Resolve(topology, dir string, knobs map[string]string) (*Spec, error) {
	var spec *Spec
	var err error
	if strings.HasSuffix(topology, ".yaml") || strings.HasSuffix(topology, ".yml") || strings.Contains(topology, "/") {
		path := topology
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		spec, err = LoadSpecFile(path)
	} else {
		spec, err = Preset(topology)
	}
	if err != nil {
		return nil, err
	}
	keys := slices.Sorted(maps.Keys(knobs))
	for _, k := range keys {
		if err := spec.Set(k, knobs[k]); err != nil {
			return nil, err
		}
	}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	return spec, nil
}

// EndpointNames lists the endpoints a lab built from s will have (client,
// server, node1, …), without building it.
func (s *Spec) EndpointNames() []string {
	l := plan(s, "chck", "check")
	names := slices.Sorted(maps.Keys(l.Endpoints))
	return names
}
