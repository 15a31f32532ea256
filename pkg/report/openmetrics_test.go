package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/fixture"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// openMetricsOf renders the Kube-OVN fixture (a failed cell, a noisy cell,
// a qperf arm without CPU figures) as OpenMetrics.
func openMetricsOf(t *testing.T) ([]byte, *Model) {
	t.Helper()
	run, ss := kubeOVNRun()
	run.ExperimentName = "kube-ovn-overlay-underlay-host"
	m := Analyze(run, ss)
	var b bytes.Buffer
	if err := writeOpenMetrics(&b, []*Model{m}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), m
}

// Prometheus's own OpenMetrics parser reads every line; each cell with
// values has its median, bounds and count, with the run's labels, and a
// cell without values has a count of 0 and no median.
func TestOpenMetricsParsesWithPrometheus(t *testing.T) {
	out, m := openMetricsOf(t)
	p, err := textparse.New(out, "application/openmetrics-text; version=1.0.0", labels.NewSymbolTable(), textparse.ParserOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{} // "family arm test size metric" → value
	n := 0
	for {
		e, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("OpenMetrics parser: %v\n%s", err, out)
		}
		if e != textparse.EntrySeries {
			continue
		}
		_, _, v := p.Series()
		var ls labels.Labels
		p.Labels(&ls)
		if ls.Get("run") != "cnb-k0vn-lab" || ls.Get("experiment") != "kube-ovn-overlay-underlay-host" || ls.Get("kernel") != "6.1.0-27-amd64" {
			t.Fatalf("run labels: %s", ls)
		}
		got[fmt.Sprintf("%s %s %s %s %s", ls.Get("__name__"), ls.Get("arm"), ls.Get("test"), ls.Get("size"), ls.Get("metric"))] = v
		n++
	}
	cells := 0
	for _, k := range m.Keys {
		c := m.cells[k]
		id := fmt.Sprintf("%s %s %d %s", k.Arm, k.Test, k.Size, k.Metric)
		count, ok := got["cnibench_samples "+id]
		if !ok || count != float64(c.Summary.N) {
			t.Errorf("%s: samples %v (%v), want %d", id, count, ok, c.Summary.N)
		}
		med, has := got["cnibench_median "+id]
		if len(c.Values) == 0 {
			if has {
				t.Errorf("%s: no values but a median %v", id, med)
			}
			continue
		}
		cells++
		if !has || med != c.Summary.Median {
			t.Errorf("%s: median %v, want %v", id, med, c.Summary.Median)
		}
		lo, hi := got["cnibench_median_ci_lower "+id], got["cnibench_median_ci_upper "+id]
		if !(lo <= med && med <= hi) {
			t.Errorf("%s: interval [%v, %v] around %v", id, lo, hi, med)
		}
	}
	if cells < 20 || n < 4*cells {
		t.Errorf("%d samples for %d cells with values", n, cells)
	}
	// The Prometheus text format (what a Pushgateway reads) takes it too.
	tp := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := tp.TextToMetricFamilies(bytes.NewReader(out))
	if err != nil || len(fams) != len(openMetricsFamilies)+1 {
		t.Fatalf("text format parser: %d families, %v", len(fams), err)
	}
}

// Pushed to a real Pushgateway (Debian's prometheus-pushgateway on a free
// loopback port), the run is one group — job cnibench, its experiment and
// run — and holds every gauge; pushing again replaces it.
func TestPushToPushgateway(t *testing.T) {
	bin, err := exec.LookPath("prometheus-pushgateway")
	if err != nil {
		t.Skip("prometheus-pushgateway not installed (apt-get install prometheus-pushgateway; scripts/install-deps.sh does)")
	}
	addr := fixture.FreeAddr(t)
	base := "http://" + addr
	fixture.Daemon(t, base+"/-/ready", bin, "--web.listen-address="+addr)
	_, m := openMetricsOf(t)
	for i := 0; i < 2; i++ {
		groups, err := PushRuns(context.Background(), base, []*Model{m})
		if err != nil || len(groups) != 1 || !strings.HasSuffix(groups[0], "/metrics/job/cnibench/experiment/kube-ovn-overlay-underlay-host/run/cnb-k0vn-lab") {
			t.Fatalf("push: %v %v", groups, err)
		}
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	tp := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := tp.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	med := fams["cnibench_median"]
	if med == nil {
		t.Fatalf("no cnibench_median on the Pushgateway")
	}
	want := 0
	for _, k := range m.Keys {
		if len(m.cells[k].Values) > 0 {
			want++
		}
	}
	if len(med.Metric) != want {
		t.Errorf("the Pushgateway holds %d medians, want %d (pushed twice: the group was replaced)", len(med.Metric), want)
	}
	for _, mt := range med.Metric {
		ls := model.LabelSet{}
		for _, lp := range mt.Label {
			ls[model.LabelName(lp.GetName())] = model.LabelValue(lp.GetValue())
		}
		if ls["job"] != "cnibench" || ls["run"] != "cnb-k0vn-lab" || ls["experiment"] != "kube-ovn-overlay-underlay-host" {
			t.Fatalf("labels on the Pushgateway: %v", ls)
		}
	}
	if _, err := PushRuns(context.Background(), "http://127.0.0.1:1", []*Model{m}); !errors.Is(err, ErrPush) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("unreachable Pushgateway: %v", err)
	}
	if _, err := PushRuns(context.Background(), "pushgateway:9091", []*Model{m}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a URL without a scheme: %v", err)
	}
}
