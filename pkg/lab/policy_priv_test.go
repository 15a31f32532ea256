package lab

import (
	"net"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/google/nftables"
)

// TestPrivPolicies: with policies=N the client (the last allowed peer)
// reaches the server over TCP and UDP in both modes; a pod that is not
// allowed is dropped (the drop counter moves); the rule or set count is N.
func TestPrivPolicies(t *testing.T) {
	testns.NeedRoot(t)
	privateState(t)
	for _, mode := range []PolicyMode{PolicyLinear, PolicySet} {
		t.Run(string(mode), func(t *testing.T) {
			l := upLab(t, presetWith(t, "native", map[string]string{"policies": "300", "policy_mode": string(mode), "pods_per_node": "2"}))
			srv, _ := l.Endpoint("server")
			cl, _ := l.Endpoint("client")
			other, err := l.Endpoint("pod1-1") // node1's second pod: not an allowed peer
			if err != nil {
				t.Fatal(err)
			}
			echoTCP(t, srv.Netns, net.JoinHostPort(srv.IP, "17433"))
			echoUDP(t, srv.Netns, net.JoinHostPort(srv.IP, "17434"))
			roundTrip(t, cl.Netns, net.JoinHostPort(srv.IP, "17433"), 64<<10)
			udpRoundTrip(t, cl.Netns, net.JoinHostPort(srv.IP, "17434"))
			var c net.Conn
			err = netns.Do(other.Netns, func() (err error) {
				c, err = net.DialTimeout("tcp4", net.JoinHostPort(srv.IP, "17433"), 300*time.Millisecond)
				return
			})
			if err == nil {
				c.Close()
				t.Fatal("a pod outside the policy connected to the server")
			}
			n2, _ := l.Endpoint("node2")
			conn := nftIn(t, n2.Netns)
			tb := &nftables.Table{Name: policyTable(l.ID), Family: nftables.TableFamilyIPv4}
			rules, err := conn.GetRules(tb, &nftables.Chain{Name: "pod-ingress", Table: tb})
			if err != nil {
				t.Fatal(err)
			}
			if countedPackets(rules) == 0 {
				t.Error("the denied connection did not hit the drop rule")
			}
			want := 300 + 2 // peers + established + drop
			if mode == PolicySet {
				want = 3
				set, err := conn.GetSetByName(tb, "allowed")
				if err != nil {
					t.Fatal(err)
				}
				els, err := conn.GetSetElements(set)
				if err != nil || len(els) != 300 {
					t.Errorf("set has %d elements (%v), want 300", len(els), err)
				}
			}
			if len(rules) != want {
				t.Errorf("%d rules in pod-ingress, want %d", len(rules), want)
			}
		})
	}
}
