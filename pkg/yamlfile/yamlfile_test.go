package yamlfile

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

type size int

func (s *size) UnmarshalYAML(n *yaml.Node) error {
	if n.Value == "big" {
		*s = 1000
		return nil
	}
	return fmt.Errorf("bad size %q (allowed: big)", n.Value)
}

type arm struct {
	Name  string            `yaml:"name"`
	Knobs map[string]string `yaml:"knobs"`
	Size  size              `yaml:"size"`
}

type doc struct {
	Name    string         `yaml:"name"`
	Repeats int            `yaml:"repeats"`
	On      *bool          `yaml:"on"`
	Sizes   []size         `yaml:"sizes"`
	Arms    []arm          `yaml:"arms"`
	Raw     yaml.Node      `yaml:"raw"`
	ByName  map[string]arm `yaml:"by_name"`
	hidden  int
	Skip    string `yaml:"-"`
}

func TestDecode(t *testing.T) {
	var d doc
	err := Decode([]byte("name: x\nrepeats: 3\non: true\nsizes: [big]\narms:\n  - {name: a, knobs: {mtu: '1450'}, size: big}\nraw: [1, 2]\nby_name: {b: {name: b}}\n"), &d, nil)
	if err != nil || d.Name != "x" || d.Repeats != 3 || d.On == nil || !*d.On || len(d.Sizes) != 1 || d.Sizes[0] != 1000 ||
		d.Arms[0].Knobs["mtu"] != "1450" || d.Arms[0].Size != 1000 || d.Raw.Kind != yaml.SequenceNode || d.ByName["b"].Name != "b" {
		t.Fatalf("Decode = %+v, %v", d, err)
	}
}

// Each error names its line, the field's path and what is allowed; none is
// yaml.v3's own text.
func TestDecodeErrors(t *testing.T) {
	help := func(path string) string {
		if path == "repeats" {
			return "an integer 1..100"
		}
		return ""
	}
	for _, c := range []struct{ in, want string }{
		{"name: x\nrepeat: 3\n", `line 2: unknown field "repeat" (allowed: name, repeats, on, sizes, arms, raw, by_name)`},
		{"arms:\n  - name: a\n    topolgy: veth\n", `line 3: unknown field "topolgy" (allowed: name, knobs, size)`},
		{"repeats: many\n", `line 1: field repeats: bad value "many" (allowed: an integer 1..100)`},
		{"on: maybe\n", `line 1: field on: bad value "maybe" (allowed: true or false)`},
		{"sizes: [big, small]\n", `line 1: field sizes[1]: bad size "small" (allowed: big)`},
		{"arms: {a: 1}\n", `line 1: field arms: bad value a map (allowed: a list of maps)`},
		{"arms:\n  - knobs: [mtu]\n", `line 2: field arms[0].knobs: bad value a list (allowed: a map)`},
		{"by_name: {b: {nme: b}}\n", `line 1: unknown field "nme" (allowed: name, knobs, size)`},
		{"hidden: 1\n", `unknown field "hidden"`},
		{"name: [\n", "yaml:"},
	} {
		var d doc
		err := Decode([]byte(c.in), &d, help)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%q) = %v, want %q", c.in, err, c.want)
		}
	}
	var d doc
	if err := Decode([]byte("# nothing\n"), &d, nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty document: %v", err)
	}
}

// A duration node parses as Go's durations do; a bad one names its line
// and the examples the caller gave.
func TestDuration(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("a: 500ms\nb: 3 seconds\n"), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Content[0].Content
	if d, err := Duration(m[1], "2s"); err != nil || d != 500*time.Millisecond {
		t.Errorf("500ms: %v, %v", d, err)
	}
	_, err := Duration(m[3], "2s, 500ms")
	if want := `line 2: bad duration "3 seconds": want e.g. 2s, 500ms`; err == nil || err.Error() != want {
		t.Errorf("3 seconds: %v; want %s", err, want)
	}
}
