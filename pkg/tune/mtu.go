package tune

import (
	"fmt"
	"net"
	"sort"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/vishvananda/netlink"
)

// MTU consistency: a tunnel device must fit inside its underlay (underlay
// MTU minus the encapsulation overhead), and a pod's interface must fit
// inside the tunnel that carries it; otherwise packets fragment or drop,
// which 002 names as a cause of UDP loss.

// LinkInfo is an interface as the MTU check sees it.
type LinkInfo struct {
	Netns       string
	Name        string
	Kind        string // vxlan, geneve, ipip, veth, …
	MTU         int
	Underlay    string // tunnels: the device packets leave by ("" unknown)
	UnderlayMTU int
	IPv6        bool // tunnel endpoints are IPv6
}

// LinkLister lists the interfaces of a namespace ("" = the caller's).
type LinkLister interface {
	Links(ns string) ([]LinkInfo, error)
}

// overhead is the bytes a tunnel adds inside the underlay MTU.
func overhead(kind string, v6 bool) (int, bool) {
	ip := 20
	if v6 {
		ip = 40
	}
	switch kind {
	case "vxlan", "geneve": // outer IP + UDP 8 + header 8 + inner Ethernet 14 (geneve without options)
		return ip + 8 + 8 + 14, true
	case "ipip", "sit", "ip6tnl":
		return ip, true
	case "gre", "ip6gre":
		return ip + 4, true
	case "gretap", "ip6gretap":
		return ip + 4 + 14, true
	}
	return 0, false
}

func init() { register(mtuKnob()) }

func mtuKnob() *Knob {
	src := srcCilium004 + "; " + srcOVSUDP + " (fragments)"
	rec := "tunnel MTU ≤ underlay MTU − overhead; pod MTU ≤ tunnel MTU"
	return &Knob{
		ID: "mtu.consistency", Title: "Tunnel and pod MTUs fit their underlay", Family: "mtu", Scope: ScopeNetns,
		Access: "netlink RTM_GETLINK (+ RTM_GETROUTE to find a tunnel's underlay) in the host and lab namespaces",
		Risk:   "none (read only)", AuditOnly: true,
		Why:  "lower the pod or tunnel MTU (or raise the underlay's) to the value shown",
		Recs: both(rec, src, src),
		Read: func(e *Env) ([]Current, error) {
			ll := e.Links
			if ll == nil {
				ll = netlinkLister{}
			}
			nss := append([]string{e.Netns}, e.LabNetns...)
			var tunnels, others []LinkInfo
			for _, ns := range nss {
				links, err := ll.Links(ns)
				if err != nil {
					return nil, err
				}
				for _, l := range links {
					if _, ok := overhead(l.Kind, l.IPv6); ok {
						tunnels = append(tunnels, l)
					} else if ns != "" && l.Name != "lo" {
						others = append(others, l)
					}
				}
			}
			var out []Current
			minTun, minName := 0, ""
			for _, t := range tunnels {
				oh, _ := overhead(t.Kind, t.IPv6)
				tgt := nsName(t.Netns, t.Name)
				if minTun == 0 || t.MTU < minTun {
					minTun, minName = t.MTU, tgt
				}
				if t.Underlay == "" {
					out = append(out, Current{Target: tgt, Err: fmt.Errorf("%s %s: underlay device not found (no route to the remote)", t.Kind, t.Name)})
					continue
				}
				fit := t.UnderlayMTU - oh
				v := fmt.Sprintf("%s mtu %d; underlay %s mtu %d − %d = %d", t.Kind, t.MTU, t.Underlay, t.UnderlayMTU, oh, fit)
				out = append(out, Current{Target: tgt, Value: v, Raw: v, hint: fmt.Sprint(t.MTU <= fit)})
			}
			underlays := map[string]bool{}
			for _, t := range tunnels {
				underlays[nsName(t.Netns, t.Underlay)] = true
			}
			if minTun > 0 {
				for _, p := range others {
					if underlays[nsName(p.Netns, p.Name)] {
						continue // carries the tunnel: checked above, not a pod interface
					}
					if p.Kind != "veth" && p.Kind != "macvlan" && p.Kind != "ipvlan" && p.Kind != "netkit" {
						continue
					}
					v := fmt.Sprintf("%s mtu %d; smallest tunnel %s mtu %d", p.Kind, p.MTU, minName, minTun)
					out = append(out, Current{Target: nsName(p.Netns, p.Name), Value: v, Raw: v, hint: fmt.Sprint(p.MTU <= minTun)})
				}
			}
			if len(out) == 0 {
				v := "no tunnel devices"
				return []Current{{Value: v, Raw: v, hint: "true"}}, nil
			}
			sort.SliceStable(out, func(i, j int) bool { return out[i].Target < out[j].Target })
			return out, nil
		},
		Judge: func(_ *Env, c Current, _ string) (Status, string, string) {
			if c.hint == "true" {
				return StatusOK, "", ""
			}
			return StatusDiffers, "", "too large: packets will fragment or be dropped"
		},
	}
}

func nsName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

type netlinkLister struct{}

func (netlinkLister) Links(ns string) ([]LinkInfo, error) {
	h, err := netns.Handle(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links%s: %w", inNs(ns), err)
	}
	byIndex := map[int]netlink.Link{}
	for _, l := range links {
		byIndex[l.Attrs().Index] = l
	}
	var out []LinkInfo
	for _, l := range links {
		a := l.Attrs()
		li := LinkInfo{Netns: ns, Name: a.Name, Kind: l.Type(), MTU: a.MTU}
		var remote net.IP
		dev := 0
		switch t := l.(type) {
		case *netlink.Vxlan:
			remote, dev = t.Group, t.VtepDevIndex
		case *netlink.Geneve:
			remote = t.Remote
		case *netlink.Iptun:
			remote, dev = t.Remote, int(t.Link)
		case *netlink.Gretun:
			remote, dev = t.Remote, int(t.Link)
		case *netlink.Gretap:
			remote, dev = t.Remote, int(t.Link)
		}
		li.IPv6 = remote != nil && remote.To4() == nil
		if dev == 0 && remote != nil && !remote.IsUnspecified() && !remote.IsMulticast() {
			if rs, err := h.RouteGet(remote); err == nil && len(rs) > 0 {
				dev = rs[0].LinkIndex
			}
		}
		if u, ok := byIndex[dev]; ok && dev != 0 {
			li.Underlay, li.UnderlayMTU = u.Attrs().Name, u.Attrs().MTU
		}
		out = append(out, li)
	}
	return out, nil
}

func inNs(ns string) string {
	if ns == "" {
		return ""
	}
	return " in netns " + ns
}
