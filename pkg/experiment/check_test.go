package experiment

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every experiment that parses must be able to run: each of these parses as
// YAML but cannot run, and is refused at parse time with an error that
// names the arm, the field and what is allowed.
func TestParseRefusesWhatCannotRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "topo.yaml"), []byte("topology: vxlan\nknobs: {mtu: 1400}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head := "name: x\ntests: [tcp_lat]\n"
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"unknown preset", "arms: [{name: a, topology: vxlann}]", []string{`arm "a"`, `unknown preset "vxlann"`, "vxlan"}},
		{"unknown knob", `arms: [{name: a, topology: vxlan, knobs: {conntrak: "on"}}]`, []string{`unknown knob "conntrak"`, "conntrack"}},
		{"bad knob value", `arms: [{name: a, topology: veth, knobs: {mtu: abc}}]`, []string{"knob mtu", `"abc"`}},
		{"knob on the wrong topology", `arms: [{name: a, topology: host, knobs: {services: "10"}}]`, []string{"knob services", "host topology"}},
		{"missing topology file", "arms: [{name: a, topology: nosuch.yaml}]", []string{"nosuch.yaml"}},
		{"endpoint the topology lacks", "arms: [{name: a, topology: veth, client: node1}]", []string{"field client", `no endpoint "node1"`, "client, server"}},
		{"unknown engine", "arms: [{name: a, topology: veth, engine: netperf}]", []string{"field engine", `unknown engine "netperf"`}},
		{"engine without the test", "tests: [tcp_crr]\narms: [{name: a, topology: veth, engine: qperf}]", []string{"qperf", "tcp_crr"}},
		{"size below a tool's minimum", "msg_sizes: [1]\narms: [{name: a, topology: veth, engine: sockperf}]", []string{"sockperf", "1 bytes"}},
		{"tcp message larger than the engine takes", "tests: [tcp_bw]\nmsg_sizes: [32M]\narms: [{name: a, topology: veth}]", []string{"tcp_bw", "33554432"}},
		{"udp datagram too large", "tests: [udp_bw]\nmsg_sizes: [64K]\narms: [{name: a, topology: veth}]", []string{"65507"}},
		{"tcp size above iperf3's maximum", "tests: [tcp_bw]\nmsg_sizes: [2M]\narms: [{name: a, topology: veth, engine: iperf3}]", []string{"iperf3", "1048576"}},
		{"udp size below iperf3's minimum", "tests: [udp_bw]\nmsg_sizes: [8]\narms: [{name: a, topology: veth, engine: iperf3}]", []string{"iperf3", "16-byte minimum"}},
		{"error names the arm's line", "arms:\n  - {name: a, topology: veth}\n  - {name: b, topology: vxlann}", []string{"line 5", `arm "b"`}},
		{"repeats out of range", "repeats: 100000000\narms: [{name: a, topology: veth}]", []string{"repeats", "10000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if !strings.HasPrefix(body, "tests:") {
				body = head + body
			} else {
				body = "name: x\n" + body
			}
			_, err := ParseIn([]byte(body), "x.yaml", dir)
			if err == nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("parsed, or error without ErrInvalid: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("not one line: %q", err)
			}
		})
	}
	// A topology file next to the experiment resolves, with its knobs.
	if _, err := ParseIn([]byte(head+"arms: [{name: a, topology: topo.yaml}]"), "x.yaml", dir); err != nil {
		t.Errorf("topology file: %v", err)
	}
}

// Every ready experiment passes the same checks.
func TestReadyExperimentsCheck(t *testing.T) {
	paths, _ := filepath.Glob("../../experiments/*.yaml")
	if len(paths) == 0 {
		t.Fatal("no ready experiments found")
	}
	for _, p := range paths {
		if _, err := LoadFile(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestOverride(t *testing.T) {
	e := mustParse(t, "name: x\ntests: [tcp_lat]\nbaseline: a\narms: [{name: a, topology: veth}, {name: b, topology: bridge}]")
	if err := e.Override(Overrides{Arms: []string{"c"}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "arms: a, b") {
		t.Errorf("unknown arm: %v", err)
	}
	if err := e.Override(Overrides{Repeats: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative repeats: %v", err)
	}
	if err := e.Override(Overrides{Arms: []string{"b"}, Repeats: 2}); err != nil || len(e.Arms) != 1 || e.Baseline != "" || e.Repeats != 2 {
		t.Errorf("override: %v arms=%d baseline=%q repeats=%d", err, len(e.Arms), e.Baseline, e.Repeats)
	}
}

func TestLoadReadyAndFile(t *testing.T) {
	for _, name := range ReadyNames() {
		if _, err := Load(name); err != nil {
			t.Errorf("ready experiment %s: %v", name, err)
		}
	}
	if len(ReadyNames()) < 7 {
		t.Errorf("ready experiments: %v", ReadyNames())
	}
	if _, err := Load("nosuch"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "ready: ") {
		t.Errorf("unknown name: %v", err)
	}
	p := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(p, []byte("name: x\ntests: [tcp_lat]\narms: [{name: a, topology: vxlann}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad file: %v", err)
	}
}

// TestLoadSaysInvalidOnce: a bad experiment file's error names the kind
// once, not once per layer that wraps it ("invalid experiment: invalid
// experiment: …" before), and still matches ErrInvalid.
func TestLoadSaysInvalidOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("name: x\ntests: [nope]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if !errors.Is(err, ErrInvalid) || strings.Count(err.Error(), ErrInvalid.Error()) != 1 {
		t.Errorf("Load: %v", err)
	}
}
