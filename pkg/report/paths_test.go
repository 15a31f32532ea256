package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
)

// withPaths gives the Cilium fixture's arms the paths a run would have
// probed: native at the underlay's 1500, vxlan 50 below it, and geneve
// whose probe got no answer.
func withPaths() Input {
	run, ss := ciliumRun(3, ubuntu20, 1)
	n := func(v int) *int { return &v }
	paths := map[string]*result.PathMTU{
		"native": {Target: "10.244.2.10:7420", Verdict: result.PathOK, MTU: n(1500), TCPMSS: n(1460)},
		"vxlan":  {Target: "10.244.2.10:7420", Verdict: result.PathOK, MTU: n(1450), TCPMSS: n(1410), Tunnel: "vxlan", UnderlayMTU: n(1500)},
		"geneve": {Target: "10.244.2.10:7420", Missing: map[string]string{"mtu": "no answer to a 576-byte probe"}},
	}
	for i := range ss {
		ss[i].Result.PathMTU = paths[ss[i].Arm]
	}
	return Input{run, ss}
}

func TestPathColumn(t *testing.T) {
	in := withPaths()
	md := string(render(t, FormatMarkdown, in))
	for _, want := range []string{"| arm | path MTU, MSS |", "| vxlan | 1450 (vxlan −50), MSS 1410 |", "| native (baseline) | 1500, MSS 1460 |",
		"| geneve | —", "path MTU: no answer to a 576-byte probe"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	txt := string(render(t, FormatTable, in))
	if !strings.Contains(txt, "path MTU") || !strings.Contains(txt, "MSS 1410") {
		t.Errorf("text report lacks the path column:\n%s", txt)
	}
	for _, l := range strings.Split(txt, "\n") {
		if n := len([]rune(l)); n > TextWidth {
			t.Errorf("line of %d columns: %s", n, l)
		}
	}
	if html := string(render(t, FormatHTML, in)); !strings.Contains(html, "<th>path MTU, MSS</th>") || !strings.Contains(html, "<td>1450 (vxlan −50), MSS 1410</td>") {
		t.Error("HTML report lacks the path column")
	}
	var doc JSONReport
	if err := json.Unmarshal(render(t, FormatJSON, in), &doc); err != nil {
		t.Fatal(err)
	}
	a := doc.Runs[0].Arms
	if a[1].Name != "vxlan" || a[1].PathMTU == nil || *a[1].PathMTU.MTU != 1450 || a[2].PathMTU.MTU != nil {
		t.Errorf("JSON arms: %+v", a)
	}
	// A run whose samples carry no path (stored before the probe) has no
	// column.
	run, ss := ciliumRun(3, ubuntu20, 1)
	if md := string(render(t, FormatMarkdown, Input{run, ss})); strings.Contains(md, "path MTU") {
		t.Errorf("a run without paths got the column:\n%s", md)
	}
}
