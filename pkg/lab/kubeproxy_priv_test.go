package lab

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/google/nftables"
)

// TestPrivProxy: kube-proxy's rules in both modes load into both nodes,
// and TCP and UDP to the measured Service VIP reach the server through
// them (DNAT by the node's netfilter), from a pod and from a node.
func TestPrivProxy(t *testing.T) {
	testns.NeedRoot(t)
	privateState(t)
	for _, mode := range []ProxyMode{ProxyIPTables, ProxyNFTables} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == ProxyIPTables {
				if _, err := exec.LookPath(iptablesRestoreBin); err != nil {
					t.Skip("iptables-restore not installed (Debian package iptables)")
				}
			}
			l := upLab(t, presetWith(t, "native", map[string]string{"proxy": string(mode), "services": "50", "endpoints": "2"}))
			svc, err := l.Endpoint("service")
			if err != nil {
				t.Fatal(err)
			}
			srv, _ := l.Endpoint("server")
			cl, _ := l.Endpoint("client")
			n1, _ := l.Endpoint("node1")
			if svc.Netns != srv.Netns || svc.IP != serviceVIP(49).String() {
				t.Fatalf("service endpoint %+v", svc)
			}
			echoTCP(t, srv.Netns, net.JoinHostPort(srv.IP, "7420"))
			echoUDP(t, srv.Netns, net.JoinHostPort(srv.IP, "7420"))
			for _, from := range []string{cl.Netns, n1.Netns} {
				roundTrip(t, from, net.JoinHostPort(svc.IP, "7420"), 64<<10)
				udpRoundTrip(t, from, net.JoinHostPort(svc.IP, "7420"))
			}
			// The rules are in each node, at the size asked for.
			ports := kubeServices(50, 2, net.ParseIP(srv.IP).To4())
			for _, ns := range []string{n1.Netns, mustNode(t, l, "node2")} {
				switch mode {
				case ProxyIPTables:
					out, err := run(context.Background(), ns, nil, "iptables-save")
					if err != nil {
						t.Fatal(err)
					}
					if got, want := strings.Count(out, "\n-A "), iptablesRuleCount(ports); got < want {
						t.Errorf("%s: iptables-save lists %d rules, want at least %d", ns, got, want)
					}
				case ProxyNFTables:
					chains, err := nftIn(t, ns).ListChainsOfTableFamily(nftables.TableFamilyIPv4)
					if err != nil {
						t.Fatal(err)
					}
					n := 0
					for _, ch := range chains {
						if ch.Table.Name == kubeProxyTable {
							n++
						}
					}
					// 49 service ports × (1 service + 2 endpoint chains), the
					// measured service's 2 ports × (1 + 1), 7 fixed chains.
					if want := 49*3 + 2*2 + 7; n != want {
						t.Errorf("%s: %d chains in table %s, want %d", ns, n, kubeProxyTable, want)
					}
				}
			}
		})
	}
}

func mustNode(t *testing.T, l *Lab, name string) string {
	t.Helper()
	e, err := l.Endpoint(name)
	if err != nil {
		t.Fatal(err)
	}
	return e.Netns
}
