package pathmtu

import (
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
)

func TestWriteText(t *testing.T) {
	n := func(v int) *int { return &v }
	for _, c := range []struct {
		p    result.PathMTU
		want []string
	}{
		{result.PathMTU{Target: "10.244.2.10:7420", Verdict: result.PathOK, MTU: n(1450), LinkMTU: n(1450), Probes: 2, Tunnel: "vxlan", UnderlayMTU: n(1500),
			TCPMSS: n(1410), TCPSndMSS: n(1398), TCPAdvMSS: n(1410), TCPPMTU: n(1450)},
			[]string{"path to 10.244.2.10:7420: 1450 (vxlan −50), MSS 1410\n", "ok: packets of the client's link MTU (1450) crossed; 2 probes",
				"MSS 1410 (1398 bytes of payload per segment + 12 of TCP timestamps); the client's SYN offered 1410"}},
		{result.PathMTU{Target: "10.244.2.10:7420", Verdict: result.PathICMP, MTU: n(1400), LinkMTU: n(1500), ICMPMTU: n(1400), Probes: 3,
			TCPMSS: n(1360), TCPSndMSS: n(1348), TCPAdvMSS: n(1360), TCPPMTU: n(1400)},
			[]string{": 1400 (ICMP frag-needed), MSS 1360\n", "limited by ICMP: a router answered larger packets with frag-needed (next hop MTU 1400); 1400 crossed; link MTU 1500"}},
		{result.PathMTU{Target: "10.244.2.10:7420", Verdict: result.PathBlackHole, MTU: n(1400), LinkMTU: n(1500), BlackHoleFrom: n(1401), Probes: 17,
			Missing: map[string]string{"tcp_mss": "TCP connection to 10.244.2.10:7420: i/o timeout"}},
			[]string{": black hole above 1400\n", "black hole: 1401 bytes neither arrived nor brought an ICMP error", "TCP: no MSS: TCP connection to 10.244.2.10:7420: i/o timeout"}},
		{result.PathMTU{Target: "10.96.0.10:7420", Probes: 1, Missing: map[string]string{"mtu": "the target refused the probe", "tcp_mss": "refused"}},
			[]string{": path MTU unknown: the target refused the probe\n", "no MTU: the target refused the probe (1 probe in"}},
	} {
		var b strings.Builder
		if err := WriteText(&b, &c.p); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("text lacks %q:\n%s", w, b.String())
			}
		}
	}
}
