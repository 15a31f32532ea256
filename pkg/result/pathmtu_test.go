package result

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

func n(v int) *int { return &v }

func TestPathMTUSummary(t *testing.T) {
	for _, c := range []struct {
		p    PathMTU
		want string
	}{
		{PathMTU{Verdict: PathOK, MTU: n(1500), TCPMSS: n(1460)}, "1500, MSS 1460"},
		{PathMTU{Verdict: PathOK, MTU: n(1450), TCPMSS: n(1410), Tunnel: "vxlan", UnderlayMTU: n(1500)}, "1450 (vxlan −50), MSS 1410"},
		{PathMTU{Verdict: PathICMP, MTU: n(1400), TCPMSS: n(1360)}, "1400 (ICMP frag-needed), MSS 1360"},
		{PathMTU{Verdict: PathBlackHole, MTU: n(1400), BlackHoleFrom: n(1401), TCPMSS: n(1460)}, "black hole above 1400, MSS 1460"},
		{PathMTU{Verdict: PathOK, MTU: n(1500)}, "1500"},
		{PathMTU{Missing: map[string]string{"mtu": "no answer"}}, "path MTU unknown: no answer"},
	} {
		if got := c.p.Summary(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
}

// The JSON names docs/json-schema.md documents for path_mtu.
func TestPathMTUFieldNames(t *testing.T) {
	p := PathMTU{Target: "10.0.0.2:7420", Verdict: PathBlackHole, MTU: n(1400), LinkMTU: n(1500), ICMPMTU: n(1450), BlackHoleFrom: n(1401),
		KernelPMTU: n(1500), Probes: 17, Seconds: 1, TCPMSS: n(1460), TCPSndMSS: n(1448), TCPAdvMSS: n(1460), TCPPMTU: n(1500),
		Tunnel: "vxlan", UnderlayMTU: n(1500), Missing: map[string]string{"x": "y"}}
	b, err := json.Marshal(Result{Schema: SchemaVersion, PathMTU: &p})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		PathMTU map[string]any `json:"path_mtu"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range doc.PathMTU {
		got = append(got, k)
	}
	sort.Strings(got)
	want := "black_hole_from icmp_mtu kernel_pmtu link_mtu missing mtu probes seconds target tcp_adv_mss tcp_mss tcp_pmtu tcp_snd_mss tunnel underlay_mtu verdict"
	if strings.Join(got, " ") != want {
		t.Errorf("fields %v, want %s", got, want)
	}
}
