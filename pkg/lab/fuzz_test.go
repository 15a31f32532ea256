package lab

import (
	"testing"
)

// FuzzParseSpec: any topology file parses strictly or is refused; a spec that
// parses is one Up takes (resolved) and names a real preset.
func FuzzParseSpec(f *testing.F) {
	for _, p := range Presets() {
		f.Add([]byte("topology: " + p + "\n"))
	}
	f.Add([]byte("topology: bridge\nnodes: 2\npods_per_node: 50\nknobs:\n  mtu: 1450\n  conntrack: \"on\"\n  services: 100\n"))
	f.Add([]byte("topology: vxlan\nknobs:\n  notrack: 10.0.0.0/8\n  offloads: tso=off,gso=off\n"))
	f.Add([]byte("topology: ovs-netdev\nknobs: {rmem_max: 1073741823, ovs_sock_buf: 1073741823}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := ParseSpec(in)
		if err != nil {
			return
		}
		if _, err := Preset(s.Topology); err != nil {
			t.Fatalf("parsed topology %q is no preset", s.Topology)
		}
		if !s.resolved {
			t.Fatalf("parsed spec is not resolved: Up would refuse it")
		}
	})
}
