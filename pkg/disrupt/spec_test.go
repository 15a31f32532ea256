package disrupt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every ready experiment parses and passes its check.
func TestReadyExperimentsCheck(t *testing.T) {
	names := Ready()
	for _, want := range []string{"blackhole-resolution", "kube-proxy-resync", "endpoint-change", "policy-replace", "probe-overhead", "ovn-restart"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("ready experiment %s missing (have %v)", want, names)
		}
	}
	for _, n := range names {
		if _, err := Load(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// Bad input gets one line naming what was wrong, matching ErrInvalid.
func TestSpecRefusals(t *testing.T) {
	base := "name: x\nevents: [{kind: blackhole, duration: 200ms}]\narms: [{name: a, topology: veth}]\n"
	for _, tc := range []struct{ text, want string }{
		{base + "bogus: 1\n", "bogus"},
		{"name: x\nevents: [{kind: quake}]\narms: [{name: a, topology: veth}]\n", `events[0].kind "quake"`},
		{"name: x\nevents: [{kind: blackhole}]\narms: [{name: a, topology: veth}]\n", "events[0].duration"},
		{"name: x\nevents: [{kind: blackhole, duration: 1500ms}]\narms: [{name: a, topology: veth}]\n", "under half the spacing"},
		{"name: x\nevents: [{kind: kube-proxy-resync}]\narms: [{name: a, topology: veth}]\n", "needs knobs {proxy"},
		{"name: x\nevents: [{kind: policy-replace}]\narms: [{name: a, topology: native}]\n", "needs knobs {policies"},
		{"name: x\nevents: [{kind: endpoint-change, service: 9}]\narms: [{name: a, topology: native, knobs: {proxy: nftables, services: \"5\"}}]\n", "events[0].service 9"},
		{base + "probes: [{kind: udp-rr, rate: 1e9}]\n", "probe rate"},
		{base + "probes: [{kind: icmp}]\n", `probe "icmp"`},
		{base + "baseline: zz\n", `baseline "zz"`},
		{"name: x\nevents: [{kind: blackhole, duration: 100ms}]\narms: [{name: a, topology: warp}]\n", "warp"},
		{"name: x\nevents: [{kind: blackhole, duration: 100ms}]\narms: [{name: a, topology: veth, server: service}]\n", "needs knobs {services"},
		// A restart on a preset that does not run the daemon names the
		// presets that do.
		{"name: x\nevents: [{kind: ovn-controller-restart}]\narms: [{name: a, topology: veth}]\n", "needs preset ovn-overlay or ovn-underlay"},
		{"name: x\nevents: [{kind: ovn-sb-restart}]\narms: [{name: a, topology: ovs-netdev-geneve}]\n", "needs preset ovn-overlay or ovn-underlay"},
		{"name: x\nevents: [{kind: vswitchd-restart}]\narms: [{name: a, topology: ovs-netdev}]\n", "needs preset ovs-netdev-geneve or ovn-overlay or ovn-underlay"},
		{"name: x\nevents: [{kind: vswitchd-restart}]\narms: [{name: a, topology: ovn-overlay, knobs: {dpdk: \"on\"}}]\n", "without dpdk=on"},
		{"name: x\nevents: [{kind: ovn-controller-restart, node: 3}]\narms: [{name: a, topology: ovn-overlay}]\n", "want node 1 to 2"},
		{"name: x\nevents: [{kind: ovn-northd-restart, node: 1}]\narms: [{name: a, topology: ovn-overlay}]\n", "give no node"},
	} {
		dir := t.TempDir()
		f := filepath.Join(dir, "x.yaml")
		if err := os.WriteFile(f, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(f)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want one line with %q matching ErrInvalid", tc.text, err, tc.want)
		}
	}
	// service: 0 is the first Service, not "unset" (the middle one).
	for text, want := range map[string]int{
		"name: x\nevents: [{kind: endpoint-change, service: 0}]\narms: [{name: a, topology: native, knobs: {proxy: nftables, services: \"5\"}}]\n": 0,
		"name: x\nevents: [{kind: endpoint-change}]\narms: [{name: a, topology: native, knobs: {proxy: nftables, services: \"5\"}}]\n":             -1,
	} {
		s, err := Parse([]byte(text))
		if err != nil || s.Check() != nil || s.Events[0].Service != want {
			t.Errorf("%q: service %d (%v), want %d", text, s.Events[0].Service, err, want)
		}
	}
	// A node daemon's restart defaults to node 2 (the server's); a
	// central one's has none.
	s, err := Parse([]byte("name: x\nevents: [{kind: ovn-controller-restart}, {kind: ovn-nb-restart}]\narms: [{name: a, topology: ovn-underlay}]\n"))
	if err != nil || s.Check() != nil || s.Events[0].Node != 2 || s.Events[1].Node != 0 {
		t.Errorf("restart nodes: %+v (%v), want 2 and 0", s.Events, err)
	}
	if _, err := Load("no-such"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "blackhole-resolution") {
		t.Errorf("unknown ready name: %v (want the ready ones listed)", err)
	}
}

func TestReportRefusals(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "r.json")
	r := fixtureResult()
	r.Schema = Schema
	var b bytes.Buffer
	if err := writeJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(good, b.Bytes(), 0o644)
	old := filepath.Join(dir, "old.json")
	os.WriteFile(old, bytes.Replace(b.Bytes(), []byte(Schema), []byte("cnibench.disruption/v0"), 1), 0o644)
	for _, c := range []ReportCommand{
		{Ref: good, Format: "pdf"},
		{Ref: filepath.Join(dir, "none.json"), Format: "text"},
		{Ref: old, Format: "text"},
	} {
		if err := c.Run(&bytes.Buffer{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", c, err)
		}
	}
	out := filepath.Join(dir, "page.html")
	if err := (&ReportCommand{Ref: good, Format: "html", Output: out}).Run(nil); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(out)
	if !bytes.Contains(page, []byte("<svg")) {
		t.Error("the page has no chart")
	}
	var text bytes.Buffer
	if err := (&ReportCommand{Ref: good, Format: "text"}).Run(&text); err != nil || !strings.Contains(text.String(), "endpoint-change") {
		t.Errorf("text: %v\n%s", err, text.String())
	}
}
