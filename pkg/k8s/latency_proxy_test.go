package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
)

// Real kube-proxy v1.31.4 metrics (nftables mode, k8slab), captured with
// `ip netns exec k8slab-n1 curl -s 127.0.0.1:10249/metrics`, its
// kubeproxy_* families kept.
func TestParseKubeProxyMetricsReal(t *testing.T) {
	f, err := os.Open("testdata/kube-proxy-v1.31.4-nftables.metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ParseKubeProxyMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	want := KubeProxySnapshot{Full: 2, FullSum: 0.042081923, Partial: 3, PartialSum: 0.098776635,
		LastSync: 1.7957543656914687e+09, Programming: 1, ProgSum: 0.609799918}
	if s != want {
		t.Errorf("got %+v\nwant %+v", s, want)
	}
}

// Metrics without the full/partial histograms (kube-proxy before v1.28,
// or not kube-proxy) are an error naming what is missing; garbage too.
func TestParseKubeProxyMetricsIncomplete(t *testing.T) {
	b, err := os.ReadFile("testdata/kube-proxy-v1.31.4-nftables.metrics")
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "kubeproxy_sync_partial_proxy_rules") {
			kept = append(kept, l)
		}
	}
	_, err = ParseKubeProxyMetrics(strings.NewReader(strings.Join(kept, "\n")))
	if !errors.Is(err, ErrNoKubeProxyMetrics) || !strings.Contains(err.Error(), metricPartialSync) {
		t.Errorf("err = %v, want ErrNoKubeProxyMetrics naming %s", err, metricPartialSync)
	}
	if _, err := ParseKubeProxyMetrics(strings.NewReader("kubeproxy_x{ 1\n")); err == nil {
		t.Error("malformed text parsed")
	}
}

// Histograms with an ip_family label (later kube-proxy versions) are summed.
func TestParseKubeProxyMetricsSumsLabels(t *testing.T) {
	var b strings.Builder
	for _, h := range []string{metricFullSync, metricPartialSync, metricProgramming} {
		fmt.Fprintf(&b, "# TYPE %s histogram\n", h)
		for i, fam := range []string{"IPv4", "IPv6"} {
			fmt.Fprintf(&b, "%s_bucket{ip_family=%q,le=\"+Inf\"} %d\n%s_sum{ip_family=%q} %d\n%s_count{ip_family=%q} %d\n",
				h, fam, i+1, h, fam, i+1, h, fam, i+1)
		}
	}
	fmt.Fprintf(&b, "# TYPE %s gauge\n%s{ip_family=\"IPv4\"} 10\n%s{ip_family=\"IPv6\"} 12\n", metricLastSync, metricLastSync, metricLastSync)
	s, err := ParseKubeProxyMetrics(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if s.Full != 3 || s.FullSum != 3 || s.Partial != 3 || s.Programming != 3 || s.LastSync != 12 {
		t.Errorf("%+v: want counts and sums 3 over both families, the latest last sync 12", s)
	}
}

// The watcher prints a line when a count changes (and a heartbeat), the
// read's error when kube-proxy does not answer.
func TestWatchKubeProxy(t *testing.T) {
	real, err := os.ReadFile("testdata/kube-proxy-v1.31.4-nftables.metrics")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reads := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		body := string(real)
		if reads >= 3 { // a partial sync happened
			body = strings.Replace(body, "kubeproxy_sync_partial_proxy_rules_duration_seconds_count 3", "kubeproxy_sync_partial_proxy_rules_duration_seconds_count 4", 1)
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	if err := WatchKubeProxy(ctx, strings.TrimPrefix(srv.URL, "http://"), 10*time.Millisecond, &out); err != nil {
		t.Fatal(err)
	}
	snaps := ParseKubeProxySnapshots(out.Bytes())
	if len(snaps) != 2 || snaps[0].Partial != 3 || snaps[1].Partial != 4 || snaps[0].Err != "" {
		t.Errorf("snapshots %+v; want the first read and the one after the partial sync, no heartbeat within 100ms", snaps)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	out.Reset()
	srv.Close()
	if err := WatchKubeProxy(ctx, strings.TrimPrefix(srv.URL, "http://"), 10*time.Millisecond, &out); err != nil {
		t.Fatal(err)
	}
	snaps = ParseKubeProxySnapshots(out.Bytes())
	if len(snaps) != 1 || !strings.Contains(snaps[0].Err, "no kube-proxy metrics on") {
		t.Errorf("no kube-proxy: %+v, want one line with the error", snaps)
	}
}

// snapAt is a snapshot at created+ms with counters.
func snapAt(created time.Time, ms float64, full, partial uint64, lastSyncMs float64) KubeProxySnapshot {
	at := created.Add(time.Duration(ms * 1e6))
	last := created.Add(time.Duration(lastSyncMs * 1e6))
	return KubeProxySnapshot{At: at.UnixNano(), Full: full, FullSum: float64(full) * 5, Partial: partial,
		PartialSum: float64(partial) * 0.02, LastSync: float64(last.UnixNano()) / 1e9, Programming: partial + full, ProgSum: float64(partial+full) * 0.5}
}

func TestKubeProxySyncsIn(t *testing.T) {
	created := time.Unix(1795754365, 0)
	sent := created.Add(-5 * time.Millisecond)
	snaps := []KubeProxySnapshot{
		snapAt(created, -20000, 1, 10, -20500), // a full sync ended 20.5 s before
		snapAt(created, -200, 2, 10, -3000),    // another, 3 s before: the last full before the window
		snapAt(created, 50, 2, 11, 30),         // a partial sync after the create
		snapAt(created, 6000, 3, 11, 5990),     // a full sync: the datapath sees it at 6 s
		snapAt(created, 6250, 3, 12, 6200),     // a partial after the datapath saw it
		snapAt(created, 6500, 3, 12, 6200),     // a heartbeat
	}
	// Seen at 6.0 s: the full sync stamped 10 ms before did it; the
	// partial at 30 ms and the one 200 ms after did not.
	k := KubeProxySyncsIn(snaps, sent, created, created.Add(6*time.Second), true)
	if k.Error != "" || k.FullSyncs != 1 || k.PartialSyncs != 0 || len(k.Syncs) != 3 {
		t.Fatalf("%+v: want the full sync only", k)
	}
	if k.FromMs != -200 || k.ToMs != 6250 || k.LastFullMs == nil || *k.LastFullMs != -3000 {
		t.Errorf("window %v..%v, last full %v; want -200..6250 and -3000", k.FromMs, k.ToMs, k.LastFullMs)
	}
	if s := k.Syncs[1]; s.Kind != "full" || math.Abs(s.EndMs-5990) > 0.001 || s.DurationMs != 5000 || !s.Between || k.Syncs[0].Between || k.Syncs[2].Between {
		t.Errorf("syncs %+v", k.Syncs)
	}
	if k.ProgrammingCount != 3 || k.ProgrammingMeanMs == nil || *k.ProgrammingMeanMs != 500 {
		t.Errorf("programming %d, %v", k.ProgrammingCount, k.ProgrammingMeanMs)
	}
	// Seen at 25 ms: the partial stamped 5 ms later did it; the window
	// ends at the first read 150 ms after.
	k = KubeProxySyncsIn(snaps, sent, created, created.Add(25*time.Millisecond), true)
	if k.FullSyncs != 0 || k.PartialSyncs != 1 || k.ToMs != 6000 {
		t.Errorf("%+v: want the partial only", k)
	}
	// Never seen: every sync stamped after the request counts.
	k = KubeProxySyncsIn(snaps, sent, created, created.Add(6300*time.Millisecond), false)
	if k.PartialSyncs != 2 || k.FullSyncs != 1 {
		t.Errorf("%+v: never seen, want all three syncs", k)
	}
	// The datapath answered 200 ms before kube-proxy's next sync: no
	// sync stood between.
	late := []KubeProxySnapshot{snaps[1], snapAt(created, 250, 2, 11, 200), snapAt(created, 500, 2, 11, 200)}
	k = KubeProxySyncsIn(late, sent, created, created.Add(-3*time.Millisecond), true)
	if k.Error != "" || k.PartialSyncs != 0 || len(k.Syncs) != 1 || k.Syncs[0].Between {
		t.Errorf("%+v: the partial stamped at 200 ms is not what the datapath saw at -3 ms", k)
	}
	// No read before the create, or none after: an error, no count.
	if k := KubeProxySyncsIn(snaps[2:], sent, created, created.Add(time.Second), true); !strings.Contains(k.Error, "before the create") {
		t.Errorf("%+v", k)
	}
	if k := KubeProxySyncsIn(snaps, sent, created, created.Add(9*time.Second), true); !strings.Contains(k.Error, "after the datapath") {
		t.Errorf("%+v", k)
	}
	bad := append([]KubeProxySnapshot{}, snaps...)
	bad[1].Err = "no kube-proxy metrics on 127.0.0.1:10249: refused"
	if k := KubeProxySyncsIn(bad, sent, created, created.Add(time.Second), true); !strings.Contains(k.Error, "refused") {
		t.Errorf("%+v", k)
	}
}

// A Service run on the fake cluster: each node's watcher log says what
// its kube-proxy did; the trials carry it, the store keeps it, and the
// split puts each trial in its group.
func TestLatencyServiceRecordsKubeProxySyncs(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	dp := newFakeDatapath(fc, map[string]time.Duration{"n1": 10 * time.Millisecond, "n2": 40 * time.Millisecond})
	// n2's kube-proxy (its datapath sees each Service at 40 ms): a partial
	// sync stamped at 36 ms in trial 1, and a full one at 38 ms too in
	// trial 2; in trial 3 no sync at all.
	dp.proxy = func(node string, trial int, created time.Time) []proxyEvent {
		if node != "n2" || trial == 3 {
			return nil
		}
		ev := []proxyEvent{{at: created.Add(36 * time.Millisecond), full: false}}
		if trial == 2 {
			ev = append(ev, proxyEvent{at: created.Add(38 * time.Millisecond), full: true})
		}
		return ev
	}
	o := latencyTestOptions(LatencyService)
	trials, db, rec, err := runLatency(t, context.Background(), fc, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) != 3 {
		t.Fatalf("%d trials", len(trials))
	}
	for _, tr := range trials {
		n1, n2 := tr.Nodes[0].KubeProxy, tr.Nodes[1].KubeProxy
		if n1 == nil || n2 == nil || n1.Error != "" || n2.Error != "" {
			t.Fatalf("trial %d: kube-proxy %+v %+v", tr.N, n1, n2)
		}
		want := []string{"", SyncPartial, SyncFull, SyncNone}[tr.N]
		if n1.FullSyncs+n1.PartialSyncs != 0 || n2.PartialSyncs != map[bool]int{true: 1}[tr.N < 3] || (n2.FullSyncs == 1) != (tr.N == 2) {
			t.Errorf("trial %d: n1 %+v, n2 %+v", tr.N, n1, n2)
		}
		if tr.KubeProxySync != want {
			t.Errorf("trial %d: kube-proxy %q, want %q", tr.N, tr.KubeProxySync, want)
		}
	}
	split := SplitByKubeProxySync(trials)
	if len(split) != 3 || split[0].Test != "svc_latency: partial syncs only" || split[1].Test != "svc_latency: full sync between" ||
		split[2].Test != "svc_latency: no sync between" || split[0].OK+split[1].OK+split[2].OK != 3 {
		t.Errorf("split %+v", split)
	}
	// Stored: the sample's control_plane carries it.
	run, _ := db.GetRun(rec.Name)
	samples, _ := db.Samples(run.ID)
	cp := samples[1].Result.ControlPlane
	if cp.KubeProxySync != SyncFull || cp.Nodes[1].KubeProxy == nil || cp.Nodes[1].KubeProxy.FullSyncs != 1 {
		b, _ := json.Marshal(cp)
		t.Errorf("stored trial 2: %s", b)
	}
	fc.wantClean(t)
}

// A node whose kube-proxy does not answer: its trials say why, the
// latency is still measured, the trial's group unknown.
func TestLatencyServiceWithoutKubeProxy(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	dp := newFakeDatapath(fc, map[string]time.Duration{"n1": 10 * time.Millisecond, "n2": 20 * time.Millisecond})
	dp.proxyDown = true
	trials, _, _, err := runLatency(t, context.Background(), fc, latencyTestOptions(LatencyService))
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trials {
		if tr.LatencyNs == nil || tr.KubeProxySync != "" || tr.Nodes[1].KubeProxy == nil || !strings.Contains(tr.Nodes[1].KubeProxy.Error, "refused") {
			t.Errorf("trial %+v", tr)
		}
	}
	if split := SplitByKubeProxySync(trials); len(split) != 1 || split[0].Test != result.SvcLatency+": kube-proxy not read" {
		t.Errorf("split %+v", split)
	}
	fc.wantClean(t)
}

func TestSummarizeKubeProxy(t *testing.T) {
	c := time.Unix(1000, 0)
	tr := func(created time.Time, lastFull float64, syncs ...result.KubeProxySync) Trial {
		return Trial{Test: result.SvcLatency, CreatedAt: created, Nodes: []result.ControlPlaneNode{{Node: "n1",
			KubeProxy: &result.KubeProxySyncs{LastFullMs: &lastFull, Syncs: syncs}}}}
	}
	trials := []Trial{
		tr(c, -1000, result.KubeProxySync{Kind: "partial", Count: 1, DurationMs: 20}),
		// the same last full, seen from the next trial; a full in this one
		tr(c.Add(10*time.Second), -11000, result.KubeProxySync{Kind: "full", Count: 1, EndMs: 19000, DurationMs: 5000}),
		tr(c.Add(40*time.Second), -11000, result.KubeProxySync{Kind: "full", Count: 2, EndMs: 20000, DurationMs: 4000}),
	}
	s := SummarizeKubeProxy(trials)
	if len(s) != 1 || s[0].Seen != 3 || len(s[0].IntervalsS) != 2 || s[0].IntervalsS[0] != 30 || s[0].IntervalsS[1] != 31 {
		t.Fatalf("%+v: want full ends at -1, 29 and 60 s: intervals 30 and 31", s)
	}
	if *s[0].MeanFullMs != (5000+4000+4000)/3.0 || *s[0].MeanPartial != 20 {
		t.Errorf("means %v %v", *s[0].MeanFullMs, *s[0].MeanPartial)
	}
}

// --summarize reads documents back, regroups their trials from each
// node's figures, and judges B against A per group; bad input is
// ErrInvalid naming the file.
func TestSummarizeLatencyDocs(t *testing.T) {
	dir := t.TempDir()
	mk := func(name, mode string, lat func(i int) (float64, int)) string {
		var trials []Trial
		for i := range 12 {
			l, partial := lat(i)
			ns := l * 1e6
			// The counts are recomputed from the syncs: partial syncs
			// that started 2 ms before the datapath saw the Service.
			k := &result.KubeProxySyncs{}
			if partial > 0 {
				k.Syncs = []result.KubeProxySync{{Kind: "partial", Count: partial, EndMs: l - 1, DurationMs: 1}}
			}
			created := time.Unix(int64(100*i), 0)
			trials = append(trials, Trial{Test: result.SvcLatency, N: i + 1, SentAt: created.Add(-time.Millisecond), CreatedAt: created, LatencyNs: &ns,
				Nodes: []result.ControlPlaneNode{{Node: "n1", LatencyNs: &ns, KubeProxy: k}}})
		}
		b, _ := json.Marshal(LatencyDoc{Schema: "cnibench.k8s-latency/v1", Run: name, Cluster: &Cluster{KubeProxyMode: mode}, Trials: trials})
		p := dir + "/" + name + ".json"
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A: every trial after one partial sync, ~2 s. B: half the trials
	// with no sync (~0 ms), half after a sync (~8 s).
	a := mk("a", "iptables", func(i int) (float64, int) { return 2000 + float64(i), 1 })
	b := mk("b", "nftables", func(i int) (float64, int) {
		if i%2 == 0 {
			return float64(i), 0
		}
		return 8000 + float64(i), 2
	})
	var out bytes.Buffer
	if err := SummarizeLatencyDocs(&out, []string{a, b}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"svc_latency: no sync between", "svc_latency: partial syncs only",
		"a sync between (partial or full): A 2005.5 ms (12), B 8006.0 ms (6): B slower",
		"full sync between: A 0, B 0 trials: not judged"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	if err := SummarizeLatencyDocs(&out, []string{a, b, a}); !errors.Is(err, ErrInvalid) {
		t.Errorf("three documents: %v", err)
	}
	bad := dir + "/bad.json"
	_ = os.WriteFile(bad, []byte(`{"schema":"cnibench.k8s-run/v1"}`), 0o644)
	if err := SummarizeLatencyDocs(&out, []string{bad}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad) {
		t.Errorf("another document: %v", err)
	}
}

// A sync begun after the instant: one sync between two reads starts at its
// stamp less its duration; a sync that began before the instant, though it
// ended after it, does not count; unreadable snapshots are skipped.
func TestSyncBegunAfter(t *testing.T) {
	at := time.Unix(1000, 0)
	snap := func(n uint64, sum, last float64) KubeProxySnapshot {
		return KubeProxySnapshot{Partial: n, PartialSum: sum, LastSync: last}
	}
	for name, c := range map[string]struct {
		snaps []KubeProxySnapshot
		want  bool
	}{
		"none":               {[]KubeProxySnapshot{snap(1, 1, 990)}, false},
		"began after":        {[]KubeProxySnapshot{snap(1, 1, 990), snap(2, 6, 1006)}, true},
		"began before":       {[]KubeProxySnapshot{snap(1, 1, 990), snap(2, 6.5, 1005)}, false},
		"then a later one":   {[]KubeProxySnapshot{snap(1, 1, 990), snap(2, 6.5, 1005), snap(3, 7.5, 1007)}, true},
		"two between, early": {[]KubeProxySnapshot{snap(1, 1, 990), snap(3, 3, 1001)}, false},
		"unreadable between": {[]KubeProxySnapshot{snap(1, 1, 990), {Err: "refused"}, snap(2, 2, 1002)}, true},
	} {
		if got := SyncBegunAfter(c.snaps, at); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

// A kube-proxy that never syncs a Service's delete: the next trial does not
// start on the agents' word alone, it is not run, with the reason.
func TestLatencyServiceWaitsForDeleteSync(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	dp := newFakeDatapath(fc, map[string]time.Duration{"n1": 10 * time.Millisecond, "n2": 20 * time.Millisecond})
	dp.noDeleteSync = true
	trials, _, _, _ := runLatency(t, context.Background(), fc, latencyTestOptions(LatencyService))
	if len(trials) != 3 {
		t.Fatalf("%d trials, want 3 stored as not run", len(trials))
	}
	for _, tr := range trials {
		if tr.LatencyNs != nil || !strings.Contains(tr.Error, "no sync begun after the Service's delete") {
			t.Errorf("trial %d: latency %v, error %q: want not run, the missing sync named", tr.N, tr.LatencyNs, tr.Error)
		}
	}
	fc.wantClean(t)
}
