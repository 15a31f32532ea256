package tune

import (
	"net"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/vishvananda/netlink"
)

// TestMTURealVxlan builds a vxlan over the test veth (both inside test
// namespaces) and checks the netlink-based MTU audit: a 1500-byte vxlan on a
// 1500-byte underlay does not fit, 1450 does; a 1500-byte pod veth behind a
// 1450-byte tunnel does not.
func TestPrivMTURealVxlan(t *testing.T) {
	p := testns.NewPair(t)
	h, err := netns.Handle(p.A)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	vx := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: "vx0", MTU: 1500}, VxlanId: 42,
		Group: net.IPv4(10, 201, 0, 2), Port: 4789}
	if err := h.LinkAdd(vx); err != nil {
		t.Skipf("vxlan not available: %v", err)
	}
	audit := func() map[string]Finding {
		e := DefaultEnv().WithNetns(p.A)
		e.LabNetns = []string{p.B}
		out := map[string]Finding{}
		for _, f := range Audit(e, []*Knob{mtuKnob()}, []Profile{Latency}) {
			out[f.Target] = f
		}
		return out
	}
	got := audit()
	vxT := p.A + "/vx0"
	if f := got[vxT]; f.Status != StatusDiffers || f.Current != "vxlan mtu 1500; underlay eth0 mtu 1500 − 50 = 1450" {
		t.Errorf("vx0 at 1500: %+v", f)
	}
	l, _ := h.LinkByName("vx0")
	if err := h.LinkSetMTU(l, 1450); err != nil {
		t.Fatal(err)
	}
	got = audit()
	if f := got[vxT]; f.Status != StatusOK {
		t.Errorf("vx0 at 1450: %+v", f)
	}
	if f := got[p.B+"/eth0"]; f.Status != StatusDiffers || f.Current != "veth mtu 1500; smallest tunnel "+vxT+" mtu 1450" {
		t.Errorf("pod veth: %+v (all: %+v)", f, got)
	}
	if f, ok := got[p.A+"/eth0"]; ok {
		t.Errorf("the underlay was judged as a pod interface: %+v", f)
	}
}
