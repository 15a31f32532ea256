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
	if strings.Count(h, "<svg") != 3 || strings.Count(h, "<details>") != 2 || !strings.Contains(h, "<title>encap:") || strings.Contains(h, "<title>idle:") {
		t.Errorf("html:\n%s", h)
	}
	var w bytes.Buffer
	r.WriteText(&w)
	if !strings.Contains(w.String(), "vxlan        tcp_lat 1B: 134 CPU-µs per transaction") {
		t.Errorf("text:\n%s", w.String())
	}
}

func TestFlameSVG(t *testing.T) {
	svg := FlameSVG(map[string]uint64{"cnibench;[user];do_syscall_64;tcp_sendmsg": 3, "cnibench;[user]": 1, "swapper;do_idle;pv_native_safe_halt": 4}, "t")
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Fatalf("flame graph does not parse: %v\n%s", err, svg)
	}
	for _, want := range []string{"<title>all: 8 samples, 100.00%</title>", "<title>tcp_sendmsg: 3 samples, 37.50%</title>",
		"<title>cnibench: 4 samples, 50.00%</title>", `fill="` + colour(TCP) + `"`, `fill="` + colour(Idle) + `"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("flame graph lacks %s", want)
		}
	}
	if FlameSVG(nil, "empty") != "" {
		t.Error("an empty profile drew a graph")
	}
}
