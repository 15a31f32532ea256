// Package testns gives privileged tests a pair of network namespaces joined
// by a veth pair, removed by t.Cleanup even when the test fails. It skips the
// test with the reason when not running as root.
package testns

import (
	"net"
	"os"
	"testing"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/vishvananda/netlink"
)

// Pair is two namespaces, A (10.201.0.1) and B (10.201.0.2), on one veth.
type Pair struct {
	A, B     string // namespace names
	AIP, BIP net.IP
}

// NeedRoot skips t unless it runs as root.
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (CI runs as root)")
	}
}

// NewPair creates the pair. Addresses live only inside the namespaces.
func NewPair(t testing.TB) *Pair {
	t.Helper()
	NeedRoot(t)
	id := runid.New()
	p := &Pair{A: runid.Name(id, "a"), B: runid.Name(id, "b"),
		AIP: net.IPv4(10, 201, 0, 1).To4(), BIP: net.IPv4(10, 201, 0, 2).To4()}
	t.Cleanup(func() {
		_ = netns.Delete(p.A)
		_ = netns.Delete(p.B)
	})
	for _, n := range []string{p.A, p.B} {
		if err := netns.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	ha, err := netns.Handle(p.A)
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	hb, err := netns.Handle(p.B)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "peer0"}
	if err := ha.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	peer, err := ha.LinkByName("peer0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(netns.Path(p.B))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := ha.LinkSetNsFd(peer, int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	setup := func(h *netlink.Handle, name, newName string, ip net.IP) {
		l, err := h.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if newName != name {
			if err := h.LinkSetName(l, newName); err != nil {
				t.Fatal(err)
			}
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(24, 32)}}
		if err := h.AddrAdd(l, addr); err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	setup(ha, "eth0", "eth0", p.AIP)
	setup(hb, "peer0", "eth0", p.BIP)
	return p
}

// NewNetns creates one empty namespace named cnb-<id>-<label>, removed
// when the test ends.
func NewNetns(t testing.TB, label string) string {
	t.Helper()
	NeedRoot(t)
	name := runid.Name(runid.New(), label)
	if err := netns.Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(name) })
	return name
}
