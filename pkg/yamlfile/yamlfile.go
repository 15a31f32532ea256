// Package yamlfile decodes the project's YAML files (experiments, lab
// topologies) strictly, with messages a user can act on: an unknown key
// names its line and the keys allowed there, and a value a field cannot
// hold names its line, the field and what it takes.
//
// It walks the document's node tree beside the Go type and decodes field
// by field, so each error is known where it happens — no error text of
// yaml.v3's is parsed back. Fields whose type unmarshals itself
// (yaml.Unmarshaler, yaml.Node) are handed their node whole.
package yamlfile

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ErrEmpty is returned for a document with nothing in it.
var ErrEmpty = errors.New("empty document")

// Help says what a field takes, by its path ("knobs", "arms[2].cpus"); ""
// falls back to what its Go type takes.
type Help func(path string) string

// Duration parses a duration node ("2s", "500ms") for a type's
// UnmarshalYAML; its error names the line and gives examples, e.g.
// "2s, 500ms".
func Duration(n *yaml.Node, examples string) (time.Duration, error) {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, fmt.Errorf("line %d: bad duration %q: want e.g. %s", n.Line, n.Value, examples)
	}
	return v, nil
}

// Decode decodes data into v, a pointer to a struct.
func Decode(data []byte, v any, help Help) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err // a syntax error: yaml's own words, with its line
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return ErrEmpty
	}
	d := decoder{help: help}
	return d.value(doc.Content[0], reflect.ValueOf(v).Elem(), "")
}

type decoder struct{ help Help }

var (
	unmarshaler = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	nodeType    = reflect.TypeOf(yaml.Node{})
)

func (d decoder) value(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	t := v.Type()
	if t == nodeType || reflect.PointerTo(t).Implements(unmarshaler) {
		if err := n.Decode(v.Addr().Interface()); err != nil {
			var te *yaml.TypeError
			if errors.As(err, &te) {
				return d.bad(n, path, t)
			}
			return fmt.Errorf("line %d: field %s: %w", n.Line, path, err)
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if n.Tag == "!!null" {
			return nil
		}
		p := reflect.New(t.Elem())
		if err := d.value(n, p.Elem(), path); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Struct:
		return d.mapping(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return d.bad(n, path, t)
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, e := range n.Content {
			if err := d.value(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return d.bad(n, path, t)
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := reflect.New(t.Key()).Elem()
			if err := d.value(n.Content[i], k, path); err != nil {
				return err
			}
			e := reflect.New(t.Elem()).Elem()
			if err := d.value(n.Content[i+1], e, join(path, n.Content[i].Value)); err != nil {
				return err
			}
			m.SetMapIndex(k, e)
		}
		v.Set(m)
		return nil
	}
	if n.Kind != yaml.ScalarNode || n.Decode(v.Addr().Interface()) != nil {
		return d.bad(n, path, t)
	}
	return nil
}

// mapping decodes a mapping node into struct v, refusing unknown keys.
func (d decoder) mapping(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.MappingNode {
		return d.bad(n, path, v.Type())
	}
	fields, names := fieldsOf(v.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		idx, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("line %d: unknown field %q (allowed: %s)", k.Line, k.Value, strings.Join(names, ", "))
		}
		if err := d.value(n.Content[i+1], v.Field(idx), join(path, k.Value)); err != nil {
			return err
		}
	}
	return nil
}

// fieldsOf maps a struct's YAML keys to field indexes, and lists the keys
// in declaration order.
func fieldsOf(t reflect.Type) (map[string]int, []string) {
	idx := map[string]int{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" || !t.Field(i).IsExported() {
			continue
		}
		idx[tag] = i
		names = append(names, tag)
	}
	return idx, names
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// bad is the error for a value field path cannot hold.
func (d decoder) bad(n *yaml.Node, path string, t reflect.Type) error {
	val := strconv.Quote(n.Value)
	switch n.Kind {
	case yaml.SequenceNode:
		val = "a list"
	case yaml.MappingNode:
		val = "a map"
	}
	help := ""
	if d.help != nil {
		help = d.help(path)
	}
	if help == "" {
		help = takes(t)
	}
	return fmt.Errorf("line %d: field %s: bad value %s (allowed: %s)", n.Line, path, val, help)
}

// takes says what a Go type takes, in a YAML user's words.
func takes(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return takes(t.Elem())
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(takes(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "a map"
	}
	return t.String()
}
