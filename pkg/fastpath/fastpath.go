// Package fastpath is cnibench's eBPF host routing: tc programs on a lab
// node that carry pod traffic past the node's IP stack, as Cilium's "BPF
// host routing" does (bpf_redirect_peer into a pod, bpf_fib_lookup and
// bpf_redirect/bpf_redirect_neigh out of the node, a collect-metadata VXLAN
// device for tunnels). See bpf/fastpath.c for the datapath itself.
//
// Attach loads one copy of the programs per node and attaches them with
// cls_bpf in direct-action mode under a clsact qdisc. The tc filters hold
// the programs and their maps, so the datapath outlives the process that
// attached it (`cnibench lab up` returns) and disappears with the node's
// namespace: there is nothing to pin and nothing to clean separately.
package fastpath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Pod is a pod on the node: its node-side veth and its eth0 MAC.
type Pod struct {
	IP     net.IP
	MAC    net.HardwareAddr
	HostIf string
}

// Tunnel sends traffic for CIDR to Remote through the node's
// collect-metadata VXLAN device Dev with VNI.
type Tunnel struct {
	CIDR   *net.IPNet
	Remote net.IP
	VNI    uint32
	Dev    string
}

// Node is what Attach needs to know about one node.
type Node struct {
	// Handle is a netlink handle in the node's namespace.
	Handle *netlink.Handle
	// Pods are the node's pods; from_pod is attached to each HostIf.
	Pods []Pod
	// Netdevs get from_netdev: the underlay for native routing, the
	// VXLAN device for a tunnel.
	Netdevs []string
	// Tunnels, if any, make from_pod encapsulate instead of routing.
	Tunnels []Tunnel
	// L2 is set on a bridged segment spanning the nodes: frames are
	// switched past the bridge unchanged instead of routed, and
	// RemotePods (the other node's pods) leave by Netdevs[0].
	L2         bool
	RemotePods []net.IP
}

// Stats is what the programs of one node did, summed over CPUs.
type Stats struct {
	Peer   uint64 `json:"peer"`   // delivered straight into a local pod
	FIB    uint64 `json:"fib"`    // routed out, next hop resolved by bpf_fib_lookup
	Neigh  uint64 `json:"neigh"`  // routed out, next hop left to bpf_redirect_neigh
	Tunnel uint64 `json:"tunnel"` // encapsulated into the VXLAN device
	Pass   uint64 `json:"pass"`   // left to the kernel's path
	L2     uint64 `json:"l2"`     // switched out of the uplink unchanged (L2 segment)
}

// Forwarded is every packet the fast path carried.
func (s Stats) Forwarded() uint64 { return s.Peer + s.FIB + s.Neigh + s.Tunnel + s.L2 }

// Endpoint flags, as bpf/fastpath.c defines them.
const (
	epRemote = 1
	epL2     = 2
)

// ErrNotSupported is returned when the kernel refuses the programs (missing
// helpers, no BPF). Callers probe first (pkg/probe's bpf-redirect-peer,
// bpf-redirect-neigh and bpf-fib-lookup) so that nothing is built for a
// kernel that cannot run them.
var ErrNotSupported = errors.New("eBPF fast path not supported")

// Attach loads the programs for one node, fills their maps and attaches
// them. The returned error leaves any clsact qdisc it added in place: the
// caller's teardown (deleting the namespace) removes it.
func Attach(n Node) error {
	var objs fastpathObjects
	if err := loadFastpathObjects(&objs, nil); err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
			return fmt.Errorf("%w: load: %v", ErrNotSupported, err)
		}
		return fmt.Errorf("fastpath: load: %w", err)
	}
	// The tc filters keep what they need; this process's descriptors go.
	defer objs.Close()
	for _, p := range n.Pods {
		l, err := n.Handle.LinkByName(p.HostIf)
		if err != nil {
			return fmt.Errorf("fastpath: pod %s: %w", p.IP, err)
		}
		var ep fastpathEndpoint
		ep.Ifindex = uint32(l.Attrs().Index)
		copy(ep.Mac[:], p.MAC)
		if n.L2 {
			ep.Flags = epL2
		}
		if err := objs.Endpoints.Put(ip4Key(p.IP), &ep); err != nil {
			return fmt.Errorf("fastpath: endpoint %s: %w", p.IP, err)
		}
	}
	if len(n.RemotePods) > 0 {
		if len(n.Netdevs) == 0 {
			return fmt.Errorf("fastpath: remote pods need an uplink device")
		}
		up, err := n.Handle.LinkByName(n.Netdevs[0])
		if err != nil {
			return fmt.Errorf("fastpath: uplink: %w", err)
		}
		for _, ip := range n.RemotePods {
			ep := fastpathEndpoint{Ifindex: uint32(up.Attrs().Index), Flags: epRemote | epL2}
			if err := objs.Endpoints.Put(ip4Key(ip), &ep); err != nil {
				return fmt.Errorf("fastpath: remote endpoint %s: %w", ip, err)
			}
		}
	}
	for _, t := range n.Tunnels {
		dev, err := n.Handle.LinkByName(t.Dev)
		if err != nil {
			return fmt.Errorf("fastpath: tunnel device: %w", err)
		}
		ones, _ := t.CIDR.Mask.Size()
		k := fastpathLpmV4{Prefixlen: uint32(ones), Addr: ip4Key(t.CIDR.IP)}
		v := fastpathTunnel{Remote: ip4Key(t.Remote), Vni: t.VNI, Ifindex: uint32(dev.Attrs().Index)}
		if err := objs.Tunnels.Put(&k, &v); err != nil {
			return fmt.Errorf("fastpath: tunnel %s: %w", t.CIDR, err)
		}
	}
	for _, p := range n.Pods {
		if err := attach(n.Handle, p.HostIf, objs.FromPod); err != nil {
			return err
		}
	}
	for _, d := range n.Netdevs {
		if err := attach(n.Handle, d, objs.FromNetdev); err != nil {
			return err
		}
	}
	return nil
}

// filterName marks cnibench's filters, so Read finds them among others.
const filterName = "cnb-fastpath"

// attach puts prog on dev's tc ingress: `tc qdisc add dev DEV clsact;
// tc filter add dev DEV ingress bpf da obj ...`.
func attach(h *netlink.Handle, dev string, prog *ebpf.Program) error {
	l, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("fastpath: %s: %w", dev, err)
	}
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := h.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("fastpath: %s: add clsact: %w", dev, err)
	}
	f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: l.Attrs().Index,
		Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd: prog.FD(), Name: filterName, DirectAction: true}
	if err := h.FilterAdd(f); err != nil {
		return fmt.Errorf("fastpath: %s: attach %s: %w", dev, filterName, err)
	}
	return nil
}

// Read sums the counters of the fast path attached to dev (any device the
// node's programs are on: one node shares one stats map). It works from any
// process, through the filter's program id, and reports ok=false when dev
// carries no fast path.
func Read(h *netlink.Handle, dev string) (s Stats, ok bool, err error) {
	l, err := h.LinkByName(dev)
	if err != nil {
		return s, false, err
	}
	fs, err := h.FilterList(l, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return s, false, fmt.Errorf("fastpath: list filters on %s: %w", dev, err)
	}
	for _, f := range fs {
		bf, isBPF := f.(*netlink.BpfFilter)
		if !isBPF || bf.Id == 0 {
			continue
		}
		prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(bf.Id))
		if err != nil {
			return s, false, fmt.Errorf("fastpath: program %d: %w", bf.Id, err)
		}
		info, err := prog.Info()
		prog.Close()
		if err != nil {
			return s, false, err
		}
		ids, _ := info.MapIDs()
		for _, id := range ids {
			m, err := ebpf.NewMapFromID(id)
			if err != nil {
				continue
			}
			mi, err := m.Info()
			if err != nil || mi.Name != "stats" {
				m.Close()
				continue
			}
			s, err = readStats(m)
			m.Close()
			return s, true, err
		}
	}
	return s, false, nil
}

func readStats(m *ebpf.Map) (Stats, error) {
	var s Stats
	dst := []*uint64{&s.Peer, &s.FIB, &s.Neigh, &s.Tunnel, &s.Pass, &s.L2}
	for i := range dst {
		var per []uint64
		if err := m.Lookup(uint32(i), &per); err != nil {
			return s, fmt.Errorf("fastpath: stats[%d]: %w", i, err)
		}
		for _, v := range per {
			*dst[i] += v
		}
	}
	return s, nil
}

// ip4Key is an IPv4 address as the programs see it: network byte order in
// a host-order u32 (the map key bytes are the address bytes).
func ip4Key(ip net.IP) uint32 {
	return binary.NativeEndian.Uint32(ip.To4())
}
