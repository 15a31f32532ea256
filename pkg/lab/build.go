package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/tune"
	"github.com/vishvananda/netlink"
	"golang.org/x/sync/errgroup"
)

// builder turns a planned Lab into kernel objects. It holds netlink handles
// and namespace file descriptors for the duration of Up.
type builder struct {
	l   *Lab
	s   *Spec
	lo  *layout
	log io.Writer

	mu      sync.Mutex
	handles map[string]*netlink.Handle
	fds     map[string]*os.File

	jmu sync.Mutex
	jr  *tune.Journal // the lab's journal, from its first change on
}

func (b *builder) logf(format string, a ...any) {
	if b.log != nil {
		fmt.Fprintf(b.log, format+"\n", a...)
	}
}

func (b *builder) close() {
	if b.jr != nil {
		b.jr.Close() // the file stays: Down and Clean roll it back
	}
	for _, h := range b.handles {
		h.Close()
	}
	for _, f := range b.fds {
		f.Close()
	}
}

// handle returns a cached netlink handle inside namespace ns ("" = root).
func (b *builder) handle(ns string) (*netlink.Handle, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handles == nil {
		b.handles, b.fds = map[string]*netlink.Handle{}, map[string]*os.File{}
	}
	if h, ok := b.handles[ns]; ok {
		return h, nil
	}
	h, err := netns.Handle(ns)
	if err != nil {
		return nil, err
	}
	b.handles[ns] = h
	return h, nil
}

// nsFd returns an open fd of a namespace, for creating links directly in it.
func (b *builder) nsFd(ns string) (netlink.NsFd, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fds == nil {
		b.handles, b.fds = map[string]*netlink.Handle{}, map[string]*os.File{}
	}
	f, ok := b.fds[ns]
	if !ok {
		var err error
		f, err = os.Open(netns.Path(ns))
		if err != nil {
			return 0, fmt.Errorf("open netns %q: %w", ns, err)
		}
		b.fds[ns] = f
	}
	return netlink.NsFd(int(f.Fd())), nil
}

// parallelism bounds concurrent namespace work: the kernel serialises most
// netlink on RTNL, but namespace creation and per-namespace setup overlap.
const parallelism = 4

// each runs fn over items with bounded parallelism, stopping at the first
// error or when ctx is cancelled.
func each[T any](ctx context.Context, items []T, fn func(T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelism)
	for _, it := range items {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return fn(it)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

func (b *builder) build(ctx context.Context) error {
	b.lo = makeLayout(b.s, b.l.ID)
	t0 := time.Now()
	if err := each(ctx, b.l.Namespaces, netns.Create); err != nil {
		return err
	}
	b.logf("namespaces: %d in %v", len(b.l.Namespaces), time.Since(t0).Round(time.Microsecond))
	if err := b.s.row().build(b, ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.applyKnobs(ctx)
}

// link returns a link by name in ns.
func (b *builder) link(ns, name string) (netlink.Link, error) {
	h, err := b.handle(ns)
	if err != nil {
		return nil, err
	}
	l, err := h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find link %q in %s: %w", name, nsLabel(ns), err)
	}
	return l, nil
}

func nsLabel(ns string) string {
	if ns == "" {
		return "host namespace"
	}
	return "netns " + ns
}

// vethToPod creates a veth pair whose host end (name hostIf, in hostNS) is
// up and whose other end is "eth0" inside the pod's namespace, in one netlink
// request (`ip link add hostIf type veth peer name eth0 netns POD`).
func (b *builder) vethToPod(hostNS string, p pod, master int, mac net.HardwareAddr) error {
	// Created down: up only after IPv6 autoconfiguration is off (below).
	la := netlink.NewLinkAttrs()
	la.MasterIndex, la.HardwareAddr = master, mac
	h, v, err := b.addEthVeth(hostNS, p.hostIf, la, p.netns,
		fmt.Sprintf("%s (%s) to pod %s", p.hostIf, nsLabel(hostNS), p.endpoint))
	if err != nil {
		return err
	}
	// The node side of a pod veth gets no IPv6 link-local address: in the
	// host namespace the host's routing stays as it was, and in a node no
	// duplicate-address or multicast-listener packets cross the pod's link
	// while it is measured (the IPv4 datapath is what the lab is for).
	if err := h.LinkSetIP6AddrGenMode(v, addrGenModeNone); err != nil {
		return fmt.Errorf("%s: ipv6 addrgenmode none: %w", p.hostIf, err)
	}
	if err := h.LinkSetUp(v); err != nil {
		return fmt.Errorf("set %s up: %w", p.hostIf, err)
	}
	return nil
}

// addEthVeth creates, in one netlink request, a veth pair at the pod MTU
// whose end name (attributes la) is in ns and whose peer is "eth0" in
// peerNS; what names the pair in the error.
func (b *builder) addEthVeth(ns, name string, la netlink.LinkAttrs, peerNS, what string) (*netlink.Handle, *netlink.Veth, error) {
	h, err := b.handle(ns)
	if err != nil {
		return nil, nil, err
	}
	fd, err := b.nsFd(peerNS)
	if err != nil {
		return nil, nil, err
	}
	la.Name, la.MTU, la.TxQLen = name, b.lo.podMTU, 1000
	v := &netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: fd, PeerMTU: uint32(b.lo.podMTU), PeerTxQLen: 1000}
	if err := h.LinkAdd(v); err != nil {
		return nil, nil, fmt.Errorf("create veth %s: %w", what, err)
	}
	return h, v, nil
}

// podEth returns the netlink handle of a pod's namespace and its eth0.
func (b *builder) podEth(p pod) (*netlink.Handle, netlink.Link, error) {
	h, err := b.handle(p.netns)
	if err != nil {
		return nil, nil, err
	}
	eth, err := h.LinkByName("eth0")
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s: find eth0: %w", p.endpoint, err)
	}
	return h, eth, nil
}

// addrGenModeNone is IN6_ADDR_GEN_MODE_NONE (`ip link set X addrgenmode none`).
const addrGenModeNone = 1

// podUp configures eth0 in a pod: its address, up, and for routed pods the
// gateway route and pinned gateway neighbour.
func (b *builder) podUp(p pod, routed bool, extraRoutes ...*net.IPNet) error {
	h, eth, err := b.podEth(p)
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.ip, Mask: net.CIDRMask(p.prefix, 32)}}
	if err := h.AddrAdd(eth, addr); err != nil {
		return fmt.Errorf("pod %s: add address %s: %w", p.endpoint, addr.IPNet, err)
	}
	if err := h.LinkSetUp(eth); err != nil {
		return fmt.Errorf("pod %s: set eth0 up: %w", p.endpoint, err)
	}
	idx := eth.Attrs().Index
	if routed {
		// ip route add 169.254.1.1 dev eth0 scope link
		gw := &netlink.Route{LinkIndex: idx, Dst: &net.IPNet{IP: gatewayIP, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}
		if err := h.RouteAdd(gw); err != nil {
			return fmt.Errorf("pod %s: gateway route: %w", p.endpoint, err)
		}
		// ip route add default via 169.254.1.1 dev eth0
		if err := h.RouteAdd(&netlink.Route{LinkIndex: idx, Gw: gatewayIP}); err != nil {
			return fmt.Errorf("pod %s: default route: %w", p.endpoint, err)
		}
		// ip neigh add 169.254.1.1 lladdr ee:ee:ee:ee:ee:ee dev eth0 nud permanent
		n := &netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT, IP: gatewayIP, HardwareAddr: gatewayMAC}
		if err := h.NeighAdd(n); err != nil {
			return fmt.Errorf("pod %s: gateway neighbour: %w", p.endpoint, err)
		}
	}
	for _, dst := range extraRoutes {
		if err := h.RouteAdd(&netlink.Route{LinkIndex: idx, Dst: dst, Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("pod %s: route %s: %w", p.endpoint, dst, err)
		}
	}
	return nil
}

// serviceRoutes is what a pod on a flat L2 topology needs to reach service
// VIPs, which are DNATed in its own output hook.
func (b *builder) serviceRoutes(p pod) []*net.IPNet {
	if b.s.Services > 0 && p.endpoint == "client" {
		return []*net.IPNet{{IP: net.IPv4(10, 96, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}}
	}
	return nil
}

// buildLoopback builds the host topology: its one namespace's loopback is
// up from netns.Create, and client and server share it.
func (b *builder) buildLoopback(context.Context) error { return nil }

func (b *builder) buildVeth(context.Context) error {
	c, s := b.lo.pods[0], b.lo.pods[1]
	// Create eth0 in the client and its peer eth0 in the server directly.
	if _, _, err := b.addEthVeth(c.netns, "eth0", netlink.NewLinkAttrs(), s.netns, "client-server"); err != nil {
		return err
	}
	if err := b.podUp(c, false, b.serviceRoutes(c)...); err != nil {
		return err
	}
	return b.podUp(s, false)
}

// ensureBridge creates a Linux bridge in ns, up, like
// `ip link add NAME type bridge && ip link set NAME up`.
func (b *builder) ensureBridge(ns, name string, mtu int) (int, error) {
	h, err := b.handle(ns)
	if err != nil {
		return 0, err
	}
	la := netlink.NewLinkAttrs()
	la.Name, la.Flags, la.MTU = name, net.FlagUp, mtu
	br := &netlink.Bridge{LinkAttrs: la}
	if err := h.LinkAdd(br); err != nil {
		return 0, fmt.Errorf("create bridge %s in %s: %w", name, nsLabel(ns), err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		return 0, err
	}
	return l.Attrs().Index, nil
}

func (b *builder) buildBridge(ctx context.Context) error {
	brName := mustIf(b.l.ID, "br")
	brIdx := make([]int, len(b.lo.nodeNS))
	for i, ns := range b.lo.nodeNS {
		idx, err := b.ensureBridge(ns, brName, b.lo.podMTU)
		if err != nil {
			return err
		}
		brIdx[i] = idx
	}
	if len(b.lo.nodeNS) == 2 {
		// The underlay link is a bridge port on both nodes: one L2 segment.
		u := mustIf(b.l.ID, "u")
		if err := b.underlay(u, brIdx[0], brIdx[1]); err != nil {
			return err
		}
		for n := 1; n <= 2; n++ {
			h, _ := b.handle(b.lo.nodeNS[n-1])
			br, err := h.LinkByIndex(brIdx[n-1])
			if err != nil {
				return err
			}
			a := &netlink.Addr{IPNet: &net.IPNet{IP: bridgeNodeIP(n), Mask: net.CIDRMask(16, 32)}}
			if err := h.AddrAdd(br, a); err != nil {
				return fmt.Errorf("node%d: address on bridge: %w", n, err)
			}
		}
	}
	return each(ctx, b.lo.pods, func(p pod) error {
		if err := b.vethToPod(b.lo.nodeNS[p.node-1], p, brIdx[p.node-1], nil); err != nil {
			return err
		}
		return b.podUp(p, false, b.serviceRoutes(p)...)
	})
}

// underlay joins node1 and node2 with a veth pair named name in both nodes.
// master1/master2 enslave the ends to a bridge (0 = none).
func (b *builder) underlay(name string, master1, master2 int) error {
	h1, err := b.handle(b.lo.nodeNS[0])
	if err != nil {
		return err
	}
	h2, err := b.handle(b.lo.nodeNS[1])
	if err != nil {
		return err
	}
	fd2, err := b.nsFd(b.lo.nodeNS[1])
	if err != nil {
		return err
	}
	la := netlink.NewLinkAttrs()
	la.Name, la.MTU, la.TxQLen, la.Flags, la.MasterIndex = name, b.lo.underMTU, 1000, net.FlagUp, master1
	v := &netlink.Veth{LinkAttrs: la, PeerName: name, PeerNamespace: fd2, PeerMTU: uint32(b.lo.underMTU), PeerTxQLen: 1000}
	if err := h1.LinkAdd(v); err != nil {
		return fmt.Errorf("create underlay veth %s: %w", name, err)
	}
	peer, err := h2.LinkByName(name)
	if err != nil {
		return fmt.Errorf("node2: find underlay %s: %w", name, err)
	}
	if master2 != 0 {
		if err := h2.LinkSetMasterByIndex(peer, master2); err != nil {
			return fmt.Errorf("node2: enslave underlay: %w", err)
		}
	}
	if err := h2.LinkSetUp(peer); err != nil {
		return fmt.Errorf("node2: set underlay up: %w", err)
	}
	return nil
}

func (b *builder) buildMacvlan(ctx context.Context) error {
	node := b.lo.nodeNS[0]
	h, err := b.handle(node)
	if err != nil {
		return err
	}
	// The node's "NIC": a veth pair inside the node namespace. The kernel
	// here has no dummy module, and a macvlan parent needs carrier, which a
	// veth whose peer is up has.
	nic := mustIf(b.l.ID, "eth0")
	la := netlink.NewLinkAttrs()
	la.Name, la.MTU, la.TxQLen, la.Flags = nic, b.lo.podMTU, 1000, net.FlagUp
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: mustIf(b.l.ID, "wire"), PeerMTU: uint32(b.lo.podMTU), PeerTxQLen: 1000}); err != nil {
		return fmt.Errorf("node1: create link %s: %w", nic, err)
	}
	wire, err := h.LinkByName(mustIf(b.l.ID, "wire"))
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(wire); err != nil {
		return err
	}
	parent, err := h.LinkByName(nic)
	if err != nil {
		return err
	}
	return each(ctx, b.lo.pods, func(p pod) error {
		fd, err := b.nsFd(p.netns)
		if err != nil {
			return err
		}
		// ip link add eth0 link NIC netns POD type macvlan mode bridge
		ma := netlink.NewLinkAttrs()
		ma.Name, ma.ParentIndex, ma.Namespace, ma.MTU = "eth0", parent.Attrs().Index, fd, b.lo.podMTU
		if err := h.LinkAdd(&netlink.Macvlan{LinkAttrs: ma, Mode: netlink.MACVLAN_MODE_BRIDGE}); err != nil {
			return fmt.Errorf("create macvlan for pod %s: %w", p.endpoint, err)
		}
		return b.podUp(p, false, b.serviceRoutes(p)...)
	})
}

// buildRouted builds the routed topologies (native and the kernel tunnels):
// two nodes on an underlay veth, pods attached by veth and reached through
// /32 routes.
func (b *builder) buildRouted(ctx context.Context) error {
	u := mustIf(b.l.ID, "u")
	if err := b.underlay(u, 0, 0); err != nil {
		return err
	}
	// Nodes and pods are independent from here on: configure them all at
	// once (the kernel's RCU waits overlap instead of adding up).
	tasks := []func() error{func() error { return b.routedNode(1, u) }, func() error { return b.routedNode(2, u) }}
	for _, p := range b.lo.pods {
		tasks = append(tasks, func() error { return b.routedPod(p) })
	}
	return each(ctx, tasks, func(f func() error) error { return f() })
}

// routedNode gives node n its underlay address, forwarding, tunnel and
// route to the other node's pods.
func (b *builder) routedNode(n int, u string) error {
	ns := b.lo.nodeNS[n-1]
	h, err := b.handle(ns)
	if err != nil {
		return err
	}
	ul, err := h.LinkByName(u)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(ul, &netlink.Addr{IPNet: &net.IPNet{IP: nodeIP(n), Mask: net.CIDRMask(underlayPrefix, 32)}}); err != nil {
		return fmt.Errorf("node%d: underlay address: %w", n, err)
	}
	if err := b.sysctl(ns, "net.ipv4.ip_forward", "1"); err != nil {
		return fmt.Errorf("node%d: %w", n, err)
	}
	if err := b.routeToOtherNode(h, n, ul); err != nil {
		return fmt.Errorf("node%d: %w", n, err)
	}
	if b.s.Services > 0 {
		// A node's own connections to a Service VIP need a route before
		// the output hook DNATs them (a real node has its default route):
		// ip route add 10.96.0.0/16 dev u
		if err := h.RouteAdd(&netlink.Route{LinkIndex: ul.Attrs().Index, Dst: serviceCIDR, Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("node%d: route to the service CIDR: %w", n, err)
		}
	}
	return nil
}

// routedPod attaches pod p to its node by veth with a /32 route.
func (b *builder) routedPod(p pod) error {
	ns := b.lo.nodeNS[p.node-1]
	if err := b.vethToPod(ns, p, 0, gatewayMAC); err != nil {
		return err
	}
	h, err := b.handle(ns)
	if err != nil {
		return err
	}
	hl, err := h.LinkByName(p.hostIf)
	if err != nil {
		return err
	}
	// ip route add POD/32 dev hostIf scope link
	r := &netlink.Route{LinkIndex: hl.Attrs().Index, Dst: &net.IPNet{IP: p.ip, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("node%d: route to pod %s: %w", p.node, p.endpoint, err)
	}
	return b.podUp(p, true)
}

// routeToOtherNode routes the other node's pod CIDR from node n: over
// the underlay (native), or through the topology's tunnel device, which it
// creates (tunnel.go).
func (b *builder) routeToOtherNode(h *netlink.Handle, n int, ul netlink.Link) error {
	m := 3 - n // the other node
	if b.s.row().tunnel.device == nil {
		// ip route add 10.244.M.0/24 via 172.31.0.M dev u
		return h.RouteAdd(&netlink.Route{LinkIndex: ul.Attrs().Index, Dst: podCIDR(m), Gw: nodeIP(m)})
	}
	tl, err := b.addTunnel(h, n, ul)
	if err != nil {
		return err
	}
	return b.routeThroughTunnel(h, n, tl)
}
