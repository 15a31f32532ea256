package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// checks is the registry, in report order.
func checks() []check {
	return []check{
		linkCheck("vxlan", "VXLAN tunnels", func() netlink.Link {
			return &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: "p-vxlan"}, VxlanId: 1, Port: 4789}
		}),
		linkCheck("geneve", "GENEVE tunnels", func() netlink.Link {
			return &netlink.Geneve{LinkAttrs: netlink.LinkAttrs{Name: "p-geneve"}, ID: 1, Remote: net.ParseIP("192.0.2.1")}
		}),
		linkCheck("ipip", "IP-in-IP tunnels (Calico IPIP)", func() netlink.Link {
			return &netlink.Iptun{LinkAttrs: netlink.LinkAttrs{Name: "p-ipip"}, Remote: net.ParseIP("192.0.2.1")}
		}),
		linkCheck("gre", "GRE tunnels", func() netlink.Link {
			return &netlink.Gretun{LinkAttrs: netlink.LinkAttrs{Name: "p-gre"}, Local: net.ParseIP("192.0.2.2").To4(), Remote: net.ParseIP("192.0.2.1").To4()}
		}),
		linkCheck("wireguard", "WireGuard (encrypted pod traffic)", func() netlink.Link {
			return &netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: "p-wg"}}
		}),
		linkCheck("netkit", "netkit devices (a veth replacement with BPF at the device)", func() netlink.Link {
			nk := &netlink.Netkit{LinkAttrs: netlink.LinkAttrs{Name: "p-nk0"}, Mode: netlink.NETKIT_MODE_L3}
			nk.SetPeerAttrs(&netlink.LinkAttrs{Name: "p-nk1"})
			return nk
		}),
		{id: "xfrm-esp", title: "IPsec ESP through XFRM", needsNS: true, run: xfrmESP},
		{id: "ovs-kernel", title: "Open vSwitch kernel datapath", run: func(context.Context, string) (*bool, string, string) {
			ok, how := moduleState("openvswitch", "ovs_datapath", "")
			return ok, how, ""
		}},
		{id: "ovs-userspace", title: "Open vSwitch userspace (netdev) datapath", run: func(context.Context, string) (*bool, string, string) {
			return binCheck("ovsdb-server", "ovs-vswitchd", "ovs-vsctl")
		}},
		{id: "ovs-dpdk", title: "Open vSwitch with DPDK (Debian openvswitch-switch-dpdk)", run: func(context.Context, string) (*bool, string, string) {
			return fileCheck("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk", "apt-get install openvswitch-switch-dpdk")
		}},
		// The lab's ovn-overlay and ovn-underlay presets run both halves of
		// OVN privately (pkg/lab/ovn.go).
		{id: "ovn-central", title: "OVN central: ovn-northd and the NB/SB schemas (Debian ovn-central)", run: func(context.Context, string) (*bool, string, string) {
			return installed("apt-get install ovn-central ovn-host", []string{"ovn-northd", "ovn-nbctl", "ovsdb-server"},
				"/usr/share/ovn/ovn-nb.ovsschema", "/usr/share/ovn/ovn-sb.ovsschema")
		}},
		{id: "ovn-host", title: "OVN chassis: ovn-controller (Debian ovn-host)", run: func(context.Context, string) (*bool, string, string) {
			return installed("apt-get install ovn-central ovn-host", []string{"ovn-controller", "ovs-vswitchd"})
		}},
		{id: "vduse", title: "VDUSE (vDPA devices in userspace)", run: func(context.Context, string) (*bool, string, string) {
			if ok, how, d := fileCheck("/dev/vduse/control", ""); ok != nil && *ok {
				return ok, how, d
			}
			ok, how := moduleState("vduse", "", "/dev/vduse/control")
			return ok, how, ""
		}},
		{id: "vdpa", title: "vDPA bus", run: func(context.Context, string) (*bool, string, string) {
			ok, how := moduleState("vdpa", "vdpa", "")
			return ok, how, ""
		}},
		{id: "btf", title: "kernel BTF (CO-RE eBPF)", run: func(context.Context, string) (*bool, string, string) {
			return fileCheck("/sys/kernel/btf/vmlinux", "CONFIG_DEBUG_INFO_BTF")
		}},
		helperCheck("bpf-redirect-peer", "tc BPF bpf_redirect_peer (into a pod, skipping its veth)", asm.FnRedirectPeer),
		helperCheck("bpf-redirect-neigh", "tc BPF bpf_redirect_neigh (out of a pod, skipping the stack)", asm.FnRedirectNeigh),
		helperCheck("bpf-fib-lookup", "tc BPF bpf_fib_lookup", asm.FnFibLookup),
		{id: "tcx", title: "tcx (tc BPF links)", needsNS: true, run: tcx},
		{id: "xdp-veth", title: "XDP on veth", needsNS: true, run: xdpVeth},
		{id: "big-tcp", title: "BIG TCP (GSO beyond 64 KiB on veth)", needsNS: true, run: bigTCP},
		{id: "ipvs", title: "IPVS (kube-proxy ipvs mode)", run: func(context.Context, string) (*bool, string, string) {
			ok, how := moduleState("ip_vs", "IPVS", "")
			return ok, how, ""
		}},
		{id: "nftables", title: "nftables (kernel) and nft", needsNS: true, run: nftablesCheck},
		{id: "iptables-nft", title: "iptables, nft backend (iptables-nft)", run: func(context.Context, string) (*bool, string, string) {
			return binCheck("iptables-nft", "iptables-nft-restore")
		}},
		{id: "iptables-legacy", title: "iptables, legacy backend", run: func(context.Context, string) (*bool, string, string) {
			ok, how, d := binCheck("iptables-legacy", "iptables-legacy-restore")
			if ok == nil || !*ok {
				return ok, how, d
			}
			kok, khow := moduleState("ip_tables", "", "/proc/net/ip_tables_names")
			return kok, how + "; " + khow, d
		}},
		{id: "perf-hardware", title: "perf events: hardware cycles", run: perfEvent(unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES)},
		{id: "perf-software", title: "perf events: software cpu-clock", run: perfEvent(unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK)},
		{id: "busy-poll", title: "socket busy polling (net.core.busy_read)", run: func(context.Context, string) (*bool, string, string) {
			ok, how, _ := fileCheck("/proc/sys/net/core/busy_read", "")
			b, _ := os.ReadFile("/proc/sys/net/core/busy_read")
			return ok, how, "busy_read=" + strings.TrimSpace(string(b)) + " (only sockets with a NAPI id poll; veth has none)"
		}},
		{id: "cpuidle", title: "a cpuidle driver (without one, idle vCPUs halt and each wake-up costs tens of µs)", run: func(context.Context, string) (*bool, string, string) {
			const dir = "/sys/devices/system/cpu/cpuidle/"
			drv, err := os.ReadFile(dir + "current_driver")
			if err != nil {
				return no(), dir + "current_driver", "absent"
			}
			gov, _ := os.ReadFile(dir + "current_governor")
			d := strings.TrimSpace(string(drv))
			detail := fmt.Sprintf("driver %s, governor %s", d, strings.TrimSpace(string(gov)))
			if d == "none" {
				return no(), dir + "current_driver", detail
			}
			return yes(), dir + "current_driver", detail
		}},
	}
}

// linkCheck creates the link in the throwaway namespace and deletes it.
func linkCheck(id, title string, mk func() netlink.Link) check {
	return check{id: id, title: title, needsNS: true, run: func(_ context.Context, ns string) (*bool, string, string) {
		return withHandle(ns, "netlink in a throwaway namespace", func(h *netlink.Handle) (*bool, string, string) {
			l := mk()
			how := fmt.Sprintf("tried a %s link in a throwaway namespace", l.Type())
			if err := h.LinkAdd(l); err != nil {
				if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ENOENT) {
					return no(), how, "the kernel refused the link type: " + err.Error()
				}
				return no(), how, err.Error()
			}
			_ = h.LinkDel(l)
			return yes(), how, ""
		})
	}}
}

func helperCheck(id, title string, fn asm.BuiltinFunc) check {
	return check{id: id, title: title, run: func(context.Context, string) (*bool, string, string) {
		how := "loaded a probe program using " + fn.String() + " (cilium/ebpf features)"
		err := features.HaveProgramHelper(ebpf.SchedCLS, fn)
		switch {
		case err == nil:
			return yes(), how, ""
		case errors.Is(err, ebpf.ErrNotSupported):
			return no(), how, err.Error()
		}
		return nil, how, err.Error()
	}}
}

func trivialProg(t ebpf.ProgramType) (*ebpf.Program, error) {
	ret := asm.Return()
	insns := asm.Instructions{asm.Mov.Imm(asm.R0, 0), ret}
	if t == ebpf.XDP {
		insns[0] = asm.Mov.Imm(asm.R0, 2) // XDP_PASS
	}
	return ebpf.NewProgram(&ebpf.ProgramSpec{Type: t, Instructions: insns, License: "GPL"})
}

// inNS runs fn on a thread inside ns. fn returns the verdict and its
// detail, or an error when the check itself could not run, which leaves the
// capability undecided.
func inNS(ns, how string, fn func() (ok bool, detail string, err error)) (*bool, string, string) {
	var ok *bool
	var detail string
	err := netns.Do(ns, func() error {
		v, d, err := fn()
		if err != nil {
			return err
		}
		ok, detail = &v, d
		return nil
	})
	if err != nil {
		return nil, how, err.Error()
	}
	return ok, how, detail
}

// withHandle runs fn with a netlink handle inside ns.
func withHandle(ns, how string, fn func(h *netlink.Handle) (*bool, string, string)) (*bool, string, string) {
	h, err := netns.Handle(ns)
	if err != nil {
		return nil, how, err.Error()
	}
	defer h.Close()
	return fn(h)
}

// withVeth runs fn while a veth pair named prefix0/prefix1 exists in ns.
func withVeth(ns, how, prefix string, fn func(h *netlink.Handle, v *netlink.Veth) (*bool, string, string)) (*bool, string, string) {
	return withHandle(ns, how, func(h *netlink.Handle) (*bool, string, string) {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: prefix + "0"}, PeerName: prefix + "1"}
		if err := h.LinkAdd(v); err != nil {
			return nil, how, err.Error()
		}
		defer func() { _ = h.LinkDel(v) }()
		return fn(h, v)
	})
}

// attachCheck attaches a trivial program of type t to ifname inside ns: the
// capability is there when attach succeeds.
func attachCheck(ns, how, ifname string, t ebpf.ProgramType, attach func(p *ebpf.Program, ifindex int) (link.Link, error)) (*bool, string, string) {
	return inNS(ns, how, func() (bool, string, error) {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return false, "", err
		}
		p, err := trivialProg(t)
		if err != nil {
			return false, "", err
		}
		defer p.Close()
		l, err := attach(p, ifc.Index)
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", l.Close()
	})
}

func tcx(_ context.Context, ns string) (*bool, string, string) {
	return attachCheck(ns, "attached a tcx program to lo in a throwaway namespace", "lo", ebpf.SchedCLS,
		func(p *ebpf.Program, ifindex int) (link.Link, error) {
			return link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: p, Attach: ebpf.AttachTCXIngress})
		})
}

func xdpVeth(_ context.Context, ns string) (*bool, string, string) {
	how := "attached an XDP program (native mode) to a veth in a throwaway namespace"
	return withVeth(ns, how, "p-xdp", func(*netlink.Handle, *netlink.Veth) (*bool, string, string) {
		return attachCheck(ns, how, "p-xdp0", ebpf.XDP, func(p *ebpf.Program, ifindex int) (link.Link, error) {
			return link.AttachXDP(link.XDPOptions{Program: p, Interface: ifindex, Flags: link.XDPDriverMode})
		})
	})
}

func bigTCP(_ context.Context, ns string) (*bool, string, string) {
	how := "set gso_max_size 185000 on a veth in a throwaway namespace and read it back"
	return withVeth(ns, how, "p-big", func(h *netlink.Handle, v *netlink.Veth) (*bool, string, string) {
		if err := h.LinkSetGSOMaxSize(v, 185000); err != nil {
			return no(), how, err.Error()
		}
		l, err := h.LinkByName("p-big0")
		if err != nil {
			return nil, how, err.Error()
		}
		if l.Attrs().GSOMaxSize > 65536 {
			return yes(), how, fmt.Sprintf("gso_max_size %d", l.Attrs().GSOMaxSize)
		}
		return no(), how, fmt.Sprintf("gso_max_size stays %d", l.Attrs().GSOMaxSize)
	})
}

func nftablesCheck(_ context.Context, ns string) (*bool, string, string) {
	return inNS(ns, "listed nftables tables over netlink in a throwaway namespace", func() (bool, string, error) {
		c, err := nftables.New()
		if err != nil {
			return false, "", err
		}
		if _, err := c.ListTables(); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

func xfrmESP(_ context.Context, ns string) (*bool, string, string) {
	how := "added and deleted an ESP security association (cbc(aes)+hmac(sha256)) in a throwaway namespace"
	return withHandle(ns, how, func(h *netlink.Handle) (*bool, string, string) {
		st := &netlink.XfrmState{Src: net.ParseIP("192.0.2.1"), Dst: net.ParseIP("192.0.2.2"), Proto: netlink.XFRM_PROTO_ESP,
			Mode: netlink.XFRM_MODE_TUNNEL, Spi: 0x100,
			Crypt: &netlink.XfrmStateAlgo{Name: "cbc(aes)", Key: make([]byte, 16)},
			Auth:  &netlink.XfrmStateAlgo{Name: "hmac(sha256)", Key: make([]byte, 32), TruncateLen: 128}}
		if err := h.XfrmStateAdd(st); err != nil {
			return no(), how, err.Error()
		}
		_ = h.XfrmStateDel(st)
		return yes(), how, ""
	})
}

func perfEvent(typ uint32, config uint64) func(context.Context, string) (*bool, string, string) {
	return func(context.Context, string) (*bool, string, string) {
		how := "perf_event_open on this process"
		attr := unix.PerfEventAttr{Type: typ, Config: config, Bits: unix.PerfBitDisabled}
		attr.Size = uint32(unsafe.Sizeof(attr))
		fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			b, _ := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
			return no(), how, fmt.Sprintf("%v (perf_event_paranoid=%s)", err, strings.TrimSpace(string(b)))
		}
		unix.Close(fd)
		return yes(), how, ""
	}
}
