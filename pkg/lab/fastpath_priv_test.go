package lab

import (
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

// nodeCounters sums the packets the lab's nftables counters saw in ns
// (the conntrack knob's stateful rules in the node's forward hook).
func nodeCounters(t *testing.T, l *Lab, ns string) uint64 {
	t.Helper()
	tb := &nftables.Table{Name: nameOfTable(l.ID), Family: nftables.TableFamilyIPv4}
	rules, err := nftIn(t, ns).GetRules(tb, &nftables.Chain{Name: "conntrack", Table: tb})
	if err != nil {
		t.Fatalf("nft rules in %s: %v", ns, err)
	}
	if len(rules) == 0 {
		t.Fatalf("no conntrack rules in %s: the test would prove nothing", ns)
	}
	return countedPackets(rules)
}

// linkStats reads a link's counters in ns.
func linkStats(t *testing.T, ns, dev string) *netlink.LinkStatistics {
	t.Helper()
	h, err := netns.Handle(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(dev)
	if err != nil {
		t.Fatalf("%s in %s: %v", dev, ns, err)
	}
	return l.Attrs().Statistics
}

// TestPrivFastpath: with fastpath=ebpf, pod-to-pod traffic (TCP with GSO
// packets, UDP) flows while the nodes' netfilter never sees it — the
// conntrack knob's counters in the forward hook stay at 0 — and the
// node-side veth of the receiving pod transmits nothing: bpf_redirect_peer
// hands the packets to the pod directly. The same lab without the fast
// path is the control: its counters and veth move, so the checks can fail.
func TestPrivFastpath(t *testing.T) {
	testns.NeedRoot(t)
	privateState(t)
	for _, c := range []struct {
		topo string
		fast bool
	}{{"native", true}, {"vxlan", true}, {"bridge", true}, {"native", false}} {
		name := c.topo + "/kernel"
		if c.fast {
			name = c.topo + "/ebpf"
		}
		t.Run(name, func(t *testing.T) {
			// On the bridge the conntrack knob filters in the server pod,
			// not in the nodes: there the bypass shows on the veth alone.
			l2 := c.topo == "bridge"
			knobs := map[string]string{"conntrack": "on"}
			if l2 {
				knobs = map[string]string{"nodes": "2"}
			}
			if c.fast {
				knobs["fastpath"] = "ebpf"
			}
			l := upLab(t, presetWith(t, c.topo, knobs))
			cl, _ := l.Endpoint("client")
			srv, _ := l.Endpoint("server")
			n1, _ := l.Endpoint("node1")
			n2, _ := l.Endpoint("node2")
			clientVeth := mustIf(l.ID, "h0") // the client pod's node-side veth on node1
			echoTCP(t, srv.Netns, net.JoinHostPort(srv.IP, "17431"))
			echoUDP(t, srv.Netns, net.JoinHostPort(srv.IP, "17432"))

			// A first exchange resolves the pods' neighbours (on the bridge
			// ARP is switched by the bridge, on the kernel's path).
			roundTrip(t, cl.Netns, net.JoinHostPort(srv.IP, "17431"), 8)
			txBefore := linkStats(t, n1.Netns, clientVeth).TxPackets
			roundTrip(t, cl.Netns, net.JoinHostPort(srv.IP, "17431"), 4<<20)
			udpRoundTrip(t, cl.Netns, net.JoinHostPort(srv.IP, "17432"))
			txDelta := linkStats(t, n1.Netns, clientVeth).TxPackets - txBefore
			var nf uint64
			if !l2 {
				nf = nodeCounters(t, l, n1.Netns) + nodeCounters(t, l, n2.Netns)
			}
			t.Logf("node netfilter packets %d, client node-side veth tx %d", nf, txDelta)

			stats, ok, err := l.FastpathStats()
			if err != nil {
				t.Fatal(err)
			}
			if !c.fast {
				if ok {
					t.Fatal("fast path stats on a lab without the fast path")
				}
				if nf == 0 || txDelta == 0 {
					t.Fatalf("control: the kernel path must show in netfilter (%d) and on the veth (%d)", nf, txDelta)
				}
				return
			}
			if !ok {
				t.Fatal("no fast path stats")
			}
			t.Logf("fast path node1 %+v node2 %+v", stats[0], stats[1])
			if nf != 0 {
				t.Errorf("the nodes' netfilter saw %d packets of pod traffic: not bypassed", nf)
			}
			// On the bridge the pods' own IPv6 multicast (duplicate-address
			// and listener reports after start) is flooded to every port,
			// the client's included: a handful of frames, not the traffic.
			if allowed := uint64(0); l2 {
				allowed = stats[0].Peer / 10 // the kernel path sends one per packet delivered
				if txDelta > allowed {
					t.Errorf("the client's node-side veth sent %d frames while %d went into the pod: delivery did not skip it", txDelta, stats[0].Peer)
				}
			} else if txDelta != 0 {
				t.Errorf("the client's node-side veth sent %d packets: delivery did not skip it", txDelta)
			}
			for i, st := range stats {
				if st.Peer == 0 {
					t.Errorf("node%d: nothing redirected into a pod: %+v", i+1, st)
				}
				out := st.FIB + st.Neigh
				switch c.topo {
				case "vxlan":
					out = st.Tunnel
				case "bridge":
					out = st.L2
				}
				if out == 0 {
					t.Errorf("node%d: nothing sent toward the other node by the fast path: %+v", i+1, st)
				}
			}
		})
	}
}

// The fast path needs node namespaces that route pod traffic: the knob is
// refused on other presets when it is set, before anything exists.
func TestFastpathKnobRefused(t *testing.T) {
	for _, topo := range []string{"host", "veth", "bridge", "macvlan", "ovs-netdev"} {
		// bridge: refused once the whole spec shows it has one node
		_, err := Resolve(topo, "", map[string]string{"fastpath": "ebpf"})
		if err == nil || !strings.Contains(err.Error(), "native, vxlan, bridge with nodes=2") {
			t.Errorf("%s: fastpath=ebpf: %v", topo, err)
		}
	}
	if _, err := Resolve("bridge", "", map[string]string{"fastpath": "ebpf", "nodes": "2"}); err != nil {
		t.Errorf("bridge nodes=2 fastpath=ebpf: %v", err)
	}
	if _, err := Resolve("native", "", map[string]string{"fastpath": "xdp"}); err == nil {
		t.Error("fastpath=xdp accepted")
	}
}

// fastpathPrograms counts the loaded BPF programs of pkg/fastpath.
func fastpathPrograms(t *testing.T) int {
	t.Helper()
	n := 0
	id := ebpf.ProgramID(0)
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			return n
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		if info, err := p.Info(); err == nil && (info.Name == "from_pod" || info.Name == "from_netdev") {
			n++
		}
		p.Close()
	}
}

// TestPrivFastpathProxyCleanAfterSIGKILL: a lab up with the fast path,
// kube-proxy rules and policies killed with SIGKILL at a random moment
// leaves nothing after `lab clean --id`: no namespace, no state, and no
// BPF program of it still loaded.
func TestPrivFastpathProxyCleanAfterSIGKILL(t *testing.T) {
	testns.NeedRoot(t)
	bin := testns.Binary(t)
	before := fastpathPrograms(t)
	id, _ := killLabUp(t, bin, "killed-fp-"+runid.New(),
		[]string{"native", "--set", "fastpath=ebpf", "--set", "proxy=nftables", "--set", "services=3000", "--set", "policies=1000"},
		func(*Lab) bool {
			// Once the state exists, somewhere in the build: namespaces,
			// rules, programs (about 1 s in all).
			time.Sleep(time.Duration(rand.IntN(800)) * time.Millisecond)
			return true
		})
	labClean(t, bin, id)
	assertClean(t, id)
	// Programs go when their devices go; the kernel frees them shortly after.
	var now int
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if now = fastpathPrograms(t); now <= before {
			return
		}
	}
	t.Errorf("%d fast path programs loaded after clean, %d before", now, before)
}
