package lab

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestPresetUnknownListsPresets(t *testing.T) {
	_, err := Preset("calico")
	if err == nil || !strings.Contains(err.Error(), "vxlan") || !strings.Contains(err.Error(), "ovs-netdev") {
		t.Fatalf("want error listing presets, got %v", err)
	}
	for _, p := range Presets() {
		if _, err := Preset(p); err != nil {
			t.Errorf("preset %s: %v", p, err)
		}
		if PresetHelp(p) == "" {
			t.Errorf("preset %s has no help line", p)
		}
	}
}

func TestSetKnobs(t *testing.T) {
	good := []struct{ topo, k, v string }{
		{"vxlan", "mtu", "1400"}, {"vxlan", "underlay_mtu", "9000"}, {"veth", "offloads", "off"},
		{"veth", "offloads", "gro=off,tso=on"}, {"native", "conntrack", "on"}, {"native", "notrack", "10.244.0.0/16,10.96.0.0/12"},
		{"native", "services", "500"}, {"ovs-netdev", "rmem_max", "1073741824"}, {"bridge", "nodes", "2"},
		{"bridge", "pods_per_node", "50"},
	}
	for _, c := range good {
		s, err := Resolve(c.topo, "", map[string]string{c.k: c.v})
		if err != nil {
			t.Errorf("%s %s=%s: %v", c.topo, c.k, c.v, err)
			continue
		}
		if s.Knobs()[c.k] != c.v {
			t.Errorf("%s=%s not recorded in Knobs()", c.k, c.v)
		}
	}
	if _, err := Resolve("host", "", map[string]string{"services": "3"}); err == nil || !strings.Contains(err.Error(), "services") {
		t.Errorf("services on host: want error, got %v", err)
	}
}

// TestSetRefuses checks every knob value a preset must refuse: one error
// line that names the knob and says want.
func TestSetRefuses(t *testing.T) {
	for _, c := range []struct {
		topo, k, want string
		values        []string
	}{
		{"vxlan", "mtu", "576..65535", []string{"big", "100"}},
		{"vxlan", "gro", `unknown knob "gro"`, []string{"off"}},
		{"veth", "offloads", "on or off", []string{"gro=maybe"}},
		{"veth", "offloads", "unknown feature", []string{"turbo=on"}},
		{"native", "conntrack", "on or off", []string{"yes please"}},
		{"native", "notrack", "CIDRs", []string{"10.0.0.300/8"}},
		{"native", "services", "0..30000", []string{"-1"}},
		{"veth", "rmem_max", "byte count", []string{"1"}},
		{"vxlan", "nodes", "bridge", []string{"2"}},
		{"veth", "pods_per_node", "not for topology veth", []string{"3"}},
		// the ovs-dpdk switch's knobs (ovsdpdk_spec.go)
		{"ovs-dpdk", "pmd_sleep", "0..10000", []string{"-1", "10001", "1ms"}},
		{"ovs-dpdk", "pmd_cpus", "bad CPU", []string{"", "x", "1024"}},
		{"ovs-dpdk", "pmd_cpus", "bad CPU range", []string{"3-1"}},
		{"ovs-dpdk", "userspace_tso", "on or off", []string{"maybe"}},
		{"ovs-dpdk", "hugepages", "64..8192", []string{"10"}},
		{"ovs-dpdk", "ring_frames", "power of two 64..8192", []string{"32", "1000", "16384"}},
		{"ovs-netdev", "pmd_sleep", "needs an OVS-DPDK switch; the ovs-netdev topology does not take it (allowed on ovs-dpdk, ovn-overlay, ovn-underlay)", []string{"50"}},
		{"veth", "hugepages", "only the ovs-dpdk topology", []string{"256"}},
		{"ovn-overlay", "hugepages", "only the ovs-dpdk topology", []string{"256"}},
		{"ovs-netdev", "ring_frames", "needs an OVS-DPDK switch", []string{"512"}},
		// the OVN presets' knobs (ovn_spec.go)
		{"ovn-overlay", "pmd_sleep", "needs dpdk=on", []string{"0", "50"}},
		{"ovn-underlay", "ring_frames", "needs dpdk=on", []string{"1024"}},
		{"ovn-overlay", "tunnel", "stt is gone from Open vSwitch", []string{"stt"}},
		{"ovn-overlay", "tunnel", "geneve or vxlan", []string{"gre", ""}},
		{"ovn-underlay", "tunnel", "only the ovn-overlay topology takes it", []string{"vxlan"}},
		{"vxlan", "router", "needs a real OVN topology", []string{"on"}},
		{"ovn-overlay", "skip_conntrack", "IPv4 CIDRs", []string{"10.16.0.0/33", "x"}},
		{"ovn-overlay", "mtu", "at most 1442 on ovn-overlay with tunnel=geneve", []string{"1443", "1500"}},
		{"native", "dpdk", "needs a real OVN topology", []string{"on"}},
	} {
		for _, v := range c.values {
			_, err := Resolve(c.topo, "", map[string]string{c.k: v})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.k) {
				t.Errorf("%s %s=%q: want one error naming the knob and %q, got %v", c.topo, c.k, v, c.want, err)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("%s %s=%q: error is not one line: %q", c.topo, c.k, v, err)
			}
		}
	}
}

// TestIntKnobBounds checks each integer knob at both ends of its range on
// a preset that takes it: the ends are accepted, one past them is refused
// as a bad value, and the range is the one its help quotes to the user.
func TestIntKnobBounds(t *testing.T) {
	checked := 0
	for _, k := range knobs {
		g, isInt := k.grammar.(intRange)
		if !isInt {
			continue
		}
		checked++
		key := k.name
		lo, hi := strconv.FormatInt(g.lo, 10), strconv.FormatInt(g.hi, 10)
		help := knobHelp(key)
		if !strings.Contains(help, lo) || !strings.Contains(help, hi) {
			t.Errorf("%s: help %q does not quote the range %s..%s", key, help, lo, hi)
		}
		topo := ""
		for _, p := range Presets() {
			if s, _ := Preset(p); s.setKnob(key, hi) == nil {
				topo = p
				break
			}
		}
		if topo == "" {
			t.Errorf("%s=%s: no preset takes it", key, hi)
			continue
		}
		s, _ := Preset(topo)
		if err := s.setKnob(key, lo); err != nil {
			t.Errorf("%s %s=%s: %v", topo, key, lo, err)
		}
		for _, v := range []int64{g.lo - 1, g.hi + 1} {
			s, _ := Preset(topo)
			if err := s.setKnob(key, strconv.FormatInt(v, 10)); err == nil || !strings.Contains(err.Error(), "bad value") {
				t.Errorf("%s %s=%d: want a bad-value error, got %v", topo, key, v, err)
			}
		}
	}
	if checked < 13 { // every integer knob of the registry, DPDK's included
		t.Errorf("%d integer knobs checked", checked)
	}
}

func TestParseSpecFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.yaml", "topology: bridge\nnodes: 2\npods_per_node: 50\nknobs:\n  mtu: 1400\n  conntrack: on\n  services: 10\n")
	s, err := LoadSpecFile(ok)
	if err != nil {
		t.Fatal(err)
	}
	if s.Topology != "bridge" || s.Nodes != 2 || s.PodsPerNode != 50 || s.MTU != 1400 || !s.Conntrack || s.Services != 10 {
		t.Fatalf("parsed %+v", s)
	}
	if lo := makeLayout(s, "abcd"); len(lo.pods) != 100 || len(lo.namespaces()) != 102 {
		t.Fatalf("2x50 bridge: %d pods, %d namespaces", len(lo.pods), len(lo.namespaces()))
	}
	cases := []struct{ name, body, want string }{
		{"unknown.yaml", "topology: vxlan\nmtuu: 1400\n", `line 2: unknown field "mtuu" (allowed: topology, nodes, pods_per_node, knobs)`},
		{"badtopo.yaml", "topology: flannel\n", `field topology: unknown "flannel" (allowed: host, veth`},
		{"notopo.yaml", "knobs: {mtu: 1400}\n", "field topology: missing"},
		{"badknob.yaml", "topology: vxlan\nknobs:\n  mtu: huge\n", `line 3: field knobs.mtu: knob mtu: bad value "huge" (allowed: an integer 576..65535`},
		{"unknownknob.yaml", "topology: vxlan\nknobs:\n  jumbo: on\n", `field knobs.jumbo: unknown knob "jumbo" (knobs:`},
		{"badnodes.yaml", "topology: vxlan\nnodes: 3\n", "field nodes: knob nodes: bad value \"3\" (allowed: 1 or 2"},
		{"badtype.yaml", "topology: vxlan\npods_per_node: many\n", `line 2: field pods_per_node: bad value "many" (allowed: an integer 1..200`},
		{"badknobs.yaml", "topology: vxlan\nknobs: [mtu]\n", `line 2: field knobs: bad value a list (allowed: a map of knob: value`},
		{"empty.yaml", "", "empty topology file"},
	}
	for _, c := range cases {
		p := write(c.name, c.body)
		_, err := LoadSpecFile(p)
		if err == nil {
			t.Errorf("%s: want error", c.name)
			continue
		}
		if !strings.HasPrefix(err.Error(), p+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant prefix %q and %q", c.name, err, p, c.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", c.name, err)
		}
	}
}

func TestLayout(t *testing.T) {
	mtu := func(topo string, sets ...string) int {
		s, _ := Preset(topo)
		for i := 0; i+1 < len(sets); i += 2 {
			if err := s.setKnob(sets[i], sets[i+1]); err != nil {
				t.Fatal(err)
			}
		}
		return makeLayout(s, "abcd").podMTU
	}
	if got := mtu("vxlan"); got != 1450 {
		t.Errorf("vxlan pod MTU %d, want 1450", got)
	}
	if got := mtu("vxlan", "underlay_mtu", "9000"); got != 8950 {
		t.Errorf("vxlan pod MTU with underlay 9000: %d, want 8950", got)
	}
	if got := mtu("native"); got != 1500 {
		t.Errorf("native pod MTU %d", got)
	}
	if got := mtu("vxlan", "mtu", "1400"); got != 1400 {
		t.Errorf("vxlan mtu=1400: %d", got)
	}
	// Every interface name fits IFNAMSIZ even with the most pods.
	for _, topo := range Presets() {
		s, _ := Preset(topo)
		if s.setKnob("pods_per_node", "200") == nil && s.Nodes == 1 {
			_ = s.setKnob("nodes", "2")
		}
		l := plan(s, "zz99", "x")
		if _, err := l.Endpoint("client"); err != nil {
			t.Errorf("%s: %v", topo, err)
		}
		if _, err := l.Endpoint("server"); err != nil {
			t.Errorf("%s: %v", topo, err)
		}
		if _, err := l.Endpoint("nope"); err == nil || !strings.Contains(err.Error(), "client") {
			t.Errorf("%s: unknown endpoint error should list endpoints: %v", topo, err)
		}
		if s.Nodes == 2 && topo != TopoBridge || topo == TopoBridge && s.Nodes == 2 {
			for _, n := range []string{"node1", "node2"} {
				if e, err := l.Endpoint(n); err != nil || e.Kind != "node" {
					t.Errorf("%s: %s: %v %+v", topo, n, err, e)
				}
			}
		}
		for _, p := range makeLayout(s, "zz99").pods {
			if len(p.hostIf) > 15 {
				t.Errorf("%s: interface %q too long", topo, p.hostIf)
			}
			if p.netns == "" {
				t.Errorf("%s: pod %s has no namespace", topo, p.endpoint)
			}
		}
	}
}

func TestEndpointOrder(t *testing.T) {
	l := &Lab{Endpoints: map[string]Endpoint{}}
	for _, n := range []string{"pod1-10", "server", "pod1-2", "node2", "client", "pod2-1", "node1"} {
		l.Endpoints[n] = Endpoint{Name: n}
	}
	got := strings.Join(l.EndpointNames(), " ")
	if want := "client server node1 node2 pod1-2 pod1-10 pod2-1"; got != want {
		t.Errorf("order %q, want %q", got, want)
	}
}
