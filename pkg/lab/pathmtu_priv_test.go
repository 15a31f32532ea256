package lab

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/result"
)

// dropFragNeeded adds a rule to namespace ns dropping the ICMP
// fragmentation-needed errors it sends itself (output hook), as a firewall
// that filters ICMP does, and returns a reader of the rule's counter.
func dropFragNeeded(t *testing.T, ns string) func() uint64 {
	t.Helper()
	c := nftIn(t, ns)
	tb := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "pmtu-test"})
	ch := c.AddChain(&nftables.Chain{Name: "output", Table: tb, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMP}},
		// ICMP type 3 (destination unreachable), code 4 (frag-needed).
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{3, 4}},
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() uint64 {
		rules, err := c.GetRules(tb, ch)
		if err != nil {
			t.Fatal(err)
		}
		return countedPackets(rules)
	}
}

func intIs(p *int, want int) bool { return p != nil && *p == want }

// TestPrivProbePath probes the paths the lab's presets build and two it
// builds with a smaller link in the middle: each MTU, how it is bounded,
// and the MSS TCP negotiates over it.
func TestPrivProbePath(t *testing.T) {
	cases := []struct {
		name, topo string
		knobs      map[string]string
		// dropICMP filters node1's frag-needed errors: a black hole.
		dropICMP bool
		verdict  string
		mtu, mss int
		tunnel   string
		summary  string
	}{
		{name: "veth", topo: "veth", verdict: result.PathOK, mtu: 1500, mss: 1460, summary: "1500, MSS 1460"},
		{name: "vxlan", topo: "vxlan", verdict: result.PathOK, mtu: 1450, mss: 1410, tunnel: "vxlan", summary: "1450 (vxlan −50), MSS 1410"},
		// Pods at 1500 over a 1400 underlay: node1 cannot forward a
		// 1500-byte packet and says so; TCP then learns the path's MTU
		// from the kernel's cache.
		{name: "icmp", topo: "native", knobs: map[string]string{"mtu": "1500", "underlay_mtu": "1400"},
			verdict: result.PathICMP, mtu: 1400, mss: 1360, summary: "1400 (ICMP frag-needed), MSS 1360"},
		// The same with node1's frag-needed dropped: TCP keeps an MSS
		// that full segments cannot cross.
		{name: "black-hole", topo: "native", knobs: map[string]string{"mtu": "1500", "underlay_mtu": "1400"}, dropICMP: true,
			verdict: result.PathBlackHole, mtu: 1400, mss: 1460, summary: "black hole above 1400, MSS 1460"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := upLab(t, presetWith(t, c.topo, c.knobs))
			var dropped func() uint64
			if c.dropICMP {
				dropped = dropFragNeeded(t, l.NodeNetns()[0])
			}
			p, err := l.ProbePath(context.Background(), "client", "server")
			if err != nil {
				t.Fatal(err)
			}
			js, _ := json.Marshal(p)
			t.Logf("%s: %s", c.name, js)
			if p.Verdict != c.verdict || !intIs(p.MTU, c.mtu) || !intIs(p.TCPMSS, c.mss) || p.Tunnel != c.tunnel {
				t.Fatalf("got %s MTU %v MSS %v tunnel %q (%v), want %s %d MSS %d tunnel %q", p.Verdict, p.MTU, p.TCPMSS, p.Tunnel, p.Missing, c.verdict, c.mtu, c.mss, c.tunnel)
			}
			// Symmetric paths: the server's MSS option is the client's.
			if !intIs(p.TCPAdvMSS, c.mss) {
				t.Errorf("the client's SYN offered MSS %v, want %d", p.TCPAdvMSS, c.mss)
			}
			if got := p.Summary(); got != c.summary {
				t.Errorf("summary %q, want %q", got, c.summary)
			}
			if p.Seconds > 2 {
				t.Errorf("the probe took %.2f s, more than its 2 s budget", p.Seconds)
			}
			switch c.verdict {
			case result.PathICMP:
				if !intIs(p.ICMPMTU, 1400) || !intIs(p.KernelPMTU, 1400) {
					t.Errorf("ICMP MTU %v, kernel PMTU %v: want both 1400", p.ICMPMTU, p.KernelPMTU)
				}
			case result.PathBlackHole:
				if !intIs(p.BlackHoleFrom, 1401) || p.ICMPMTU != nil || !intIs(p.KernelPMTU, 1500) {
					t.Errorf("black hole from %v, ICMP %v, kernel PMTU %v: want 1401, none, 1500", p.BlackHoleFrom, p.ICMPMTU, p.KernelPMTU)
				}
				// The router did answer the large probes; the rule
				// made them vanish.
				if n := dropped(); n == 0 {
					t.Error("the rule dropped no frag-needed: the black hole was not the one built")
				}
			}
		})
	}
}

// Node to node on the vxlan preset crosses the underlay unencapsulated:
// its MTU is the underlay's, and no tunnel is named.
func TestPrivProbePathNodes(t *testing.T) {
	l := upLab(t, presetWith(t, "vxlan", nil))
	p, err := l.ProbePath(context.Background(), "node1", "node2")
	if err != nil {
		t.Fatal(err)
	}
	if p.Verdict != result.PathOK || !intIs(p.MTU, 1500) || p.Tunnel != "" || !intIs(p.TCPMSS, 1460) {
		t.Fatalf("got %+v", *p)
	}
}
