package lab

import (
	"reflect"
	"strings"
	"testing"
)

// TestTopologyRowsComplete fails for a row that leaves a fact out: every
// field of every row must be set, a yes/no fact to yes or no, the others
// to a value or to their explicit "none" (noTunnel, noFastpath, …).
func TestTopologyRowsComplete(t *testing.T) {
	typ := reflect.TypeOf(topology{})
	for _, row := range topologies {
		v := reflect.ValueOf(row).Elem()
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if v.Field(i).IsZero() {
				t.Errorf("topology %q: fact %s is not set", row.name, f.Name)
			}
			if f.Type == reflect.TypeOf(yes) {
				if yn := yesNo(v.Field(i).Uint()); yn != yes && yn != no {
					t.Errorf("topology %q: fact %s is %d, neither yes nor no", row.name, f.Name, yn)
				}
			}
		}
	}
	if len(topologyIndex) != len(topologies) {
		t.Errorf("%d rows, %d names: a name is used twice", len(topologies), len(topologyIndex))
	}
}

// TestTopologyRowsConsistent checks the facts that follow from each other,
// so a new row cannot contradict itself: a routed topology has two nodes
// and its nodes are endpoints; a kernel tunnel names its device and kernel
// option; a fast path needs nodes that can be two; a DPDK switch is
// private.
func TestTopologyRowsConsistent(t *testing.T) {
	for _, row := range topologies {
		canHaveTwoNodes := row.shape.nodes == 2 || row.nodesKnob == yes
		if row.routed == yes && row.shape.nodes != 2 {
			t.Errorf("%s: routed with %d nodes", row.name, row.shape.nodes)
		}
		if tun := row.tunnel; tun.device != nil && (tun.kernelOption == "" || tun.ifSuffix == "" || tun.overhead == 0) {
			t.Errorf("%s: kernel tunnel %+v lacks its option, name or overhead", row.name, tun)
		}
		if row.tunnel.device != nil && row.routed != yes {
			t.Errorf("%s: a kernel tunnel is only routed to (buildRouted)", row.name)
		}
		if row.fastpath.supported() && !canHaveTwoNodes {
			t.Errorf("%s: a fast path without two nodes to run on", row.name)
		}
		if row.dpdk == yes && row.privateOVS != yes {
			t.Errorf("%s: a DPDK switch is always the lab's own", row.name)
		}
		if row.shape.pods < 1 || row.shape.nodes < 0 || row.shape.nodes > 2 {
			t.Errorf("%s: shape %+v", row.name, row.shape)
		}
		if row.podMTU.max < 576 || row.podMTU.why == "" {
			t.Errorf("%s: pod MTU cap %+v", row.name, row.podMTU)
		}
	}
}

// TestEveryPresetFromItsRow: each preset's spec, layout and plan come from
// its row — its shape, its endpoints (nodes where it has two), its
// namespaces, the pod MTU its tunnel leaves — and Up would take it.
func TestEveryPresetFromItsRow(t *testing.T) {
	for _, row := range topologies {
		s, err := Preset(row.name)
		if err != nil {
			t.Errorf("%s: %v", row.name, err)
			continue
		}
		if !s.resolved || s.row() != row || s.Nodes != row.shape.nodes || s.PodsPerNode != row.shape.pods || (s.DPDK != nil) != (row.dpdk == yes) {
			t.Errorf("%s: spec %+v does not follow its row", row.name, s)
		}
		if PresetHelp(row.name) != row.help || !strings.Contains(PresetList(), row.help) {
			t.Errorf("%s: help line not listed", row.name)
		}
		l := plan(s, "zz99", "x")
		for _, ep := range []string{"client", "server"} {
			if e, err := l.Endpoint(ep); err != nil || e.Kind != "pod" || e.Netns == "" {
				t.Errorf("%s: endpoint %s: %+v %v", row.name, ep, e, err)
			}
		}
		_, hasNode := l.Endpoints["node1"]
		if wantNodes := row.shape.nodes == 2; hasNode != wantNodes {
			t.Errorf("%s: node endpoints %v, want %v", row.name, hasNode, wantNodes)
		}
		lo := makeLayout(s, "zz99")
		if len(lo.nodeNS) != row.shape.nodes || len(l.Namespaces) != len(lo.namespaces()) || l.Pods != row.shape.pods*max(1, row.shape.nodes) {
			t.Errorf("%s: %d node namespaces, %d namespaces, %d pods", row.name, len(lo.nodeNS), len(l.Namespaces), l.Pods)
		}
		if want := 1500 - row.tunnel.overhead - s.ovnMTUMargin(); lo.podMTU != want {
			t.Errorf("%s: pod MTU %d, want %d", row.name, lo.podMTU, want)
		}
		if (l.PodMTU == 0) != (row.loopback == yes) {
			t.Errorf("%s: recorded pod MTU %d", row.name, l.PodMTU)
		}
		if (len(l.PrivateOVS) > 0) != (row.privateOVS == yes) {
			t.Errorf("%s: private OVS %v", row.name, l.PrivateOVS)
		}
		if l.ChangesHost() != (row.changesHost == yes) { // a plan holds no journal: only the row decides
			t.Errorf("%s: ChangesHost %v", row.name, l.ChangesHost())
		}
	}
	// The bridge takes a second node: its nodes become endpoints on the
	// one L2 segment.
	s, err := Resolve(TopoBridge, "", map[string]string{"nodes": "2"})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := plan(s, "zz99", "x").Endpoint("node2"); err != nil || e.IP != "10.244.2.1" {
		t.Errorf("bridge nodes=2: node2 %+v %v", e, err)
	}
}
