package pressure

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/netns"
)

// Source addresses. One client address gives one 4-tuple per source port,
// and connect() takes only the even ports of the range (Linux keeps the odd
// ones for bind), so about 32,000 tuples; a tuple used again replaces its
// conntrack entry instead of adding one, so beyond that count one client
// address cannot fill a table any further — the client would be the limit
// and the datapath would look better than it is. The run adds addresses to
// the client pod, each routed like the pod's own, and spreads connections
// over them.

// evenPorts is how many tuples one source address gives connect() with the
// run's port range (1024..65535).
const evenPorts = (65535 - 1024 + 1) / 2

// addSources gives the client pod n−1 more addresses after its own, each
// a /32 like the pod's, routed from the pod's node the way the pod's own
// address is (the node's host route to it, through the same interface).
// They go with the lab's namespaces. It returns every source address, the
// pod's first; when the lab's shape gives no such route (the pod is not
// routed by a node), only the pod's address, and why.
func addSources(l *lab.Lab, cli lab.Endpoint, n int) ([]netip.Addr, string, error) {
	own, err := netip.ParseAddr(cli.IP)
	if err != nil || !own.Is4() {
		return nil, "", fmt.Errorf("client address %q: pressure runs over IPv4", cli.IP)
	}
	out := []netip.Addr{own}
	if n <= 1 {
		return out, "", nil
	}
	// The node that routes the pod: a host route to the pod's address
	// straight out of an interface.
	nodeNS, linkIdx := "", 0
	for _, e := range l.Endpoints {
		if e.Kind != "node" || e.Netns == "" {
			continue
		}
		h, err := netns.Handle(e.Netns)
		if err != nil {
			return nil, "", err
		}
		routes, err := h.RouteListFiltered(unix.AF_INET, &netlink.Route{Dst: &net.IPNet{IP: own.AsSlice(), Mask: net.CIDRMask(32, 32)}}, netlink.RT_FILTER_DST)
		h.Close()
		if err != nil {
			return nil, "", fmt.Errorf("routes in %s: %w", e.Netns, err)
		}
		for _, r := range routes {
			if r.Gw == nil && r.LinkIndex > 0 {
				nodeNS, linkIdx = e.Netns, r.LinkIndex
			}
		}
	}
	if nodeNS == "" {
		return out, "no node routes the client pod by a host route here: one source address", nil
	}
	ch, err := netns.Handle(cli.Netns)
	if err != nil {
		return nil, "", err
	}
	defer ch.Close()
	eth, err := ch.LinkByName("eth0")
	if err != nil {
		return nil, "", fmt.Errorf("client eth0: %w", err)
	}
	nh, err := netns.Handle(nodeNS)
	if err != nil {
		return nil, "", err
	}
	defer nh.Close()
	a := own
	for len(out) < n {
		// The next address of the pod's /24 above what the lab's pods
		// can use.
		a = a.Next()
		if !inSame24(a, own) {
			return nil, "", errors.New("no room for more client addresses in the pod's /24")
		}
		if usedByLab(l, a) {
			continue
		}
		a4 := a.As4()
		ipn := &net.IPNet{IP: net.IP(a4[:]), Mask: net.CIDRMask(32, 32)}
		if err := ch.AddrAdd(eth, &netlink.Addr{IPNet: ipn}); err != nil {
			return nil, "", fmt.Errorf("add %s to the client pod: %w", a, err)
		}
		if err := nh.RouteAdd(&netlink.Route{Dst: ipn, LinkIndex: linkIdx, Scope: netlink.SCOPE_LINK}); err != nil {
			return nil, "", fmt.Errorf("route %s in %s: %w", a, nodeNS, err)
		}
		out = append(out, a)
	}
	return out, "", nil
}

func inSame24(a, b netip.Addr) bool {
	x, y := a.As4(), b.As4()
	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] != 255
}

func usedByLab(l *lab.Lab, a netip.Addr) bool {
	for _, e := range l.Endpoints {
		if e.IP == a.String() {
			return true
		}
	}
	return a.As4()[3] < 210 // the lab numbers pods from .10, at most 200 a node
}
