package stages

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

func TestReportRender(t *testing.T) {
	ss, ps := synthetic(30)
	cells, err := Cells(ss, ps)
	if err != nil {
		t.Fatal(err)
	}
	r := &Report{Cells: cells}
	rows := r.Rows()
	var encCost, encShare bool
	for _, x := range rows {
		if x.Arm == "vxlan" && x.Metric == "stage_cost:encap" && x.Unit == PerTransaction && x.Value == 32 && x.N == 5 {
			encCost = true
		}
		if x.Arm == "vxlan" && x.Metric == "stage_share:encap" && x.Unit == "%" && x.Value > 0 {
			encShare = true
		}
		if x.Arm == "native" && strings.HasSuffix(x.Metric, ":encap") {
			t.Errorf("native has an encap row: %+v", x)
		}
	}
	if !encCost || !encShare {
		t.Errorf("rows lack vxlan's encap cost/share: %+v", rows)
	}
	h := r.HTML()
	// Each SVG is well-formed XML on its own (self-contained).
	for _, part := range strings.Split(h, "<svg")[1:] {
		svg := "<svg" + part[:strings.Index(part, "</svg>")+len("</svg>")]
		if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
			t.Errorf("svg does not parse: %v", err)
		}
	}
	if strings.Count(h, "<svg") != 1 || !strings.Contains(h, "<title>encap:") || strings.Contains(h, "<title>idle:") {
		t.Errorf("html:\n%s", h)
	}
	var w bytes.Buffer
	r.WriteText(&w)
	if !strings.Contains(w.String(), "vxlan        tcp_lat 1B: 134 CPU-µs per transaction") {
		t.Errorf("text:\n%s", w.String())
	}
}
