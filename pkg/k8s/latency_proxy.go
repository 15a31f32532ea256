package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
	cnbstats "github.com/cnibench/cnibench/pkg/stats"
)

// What kube-proxy did during each Service trial, from its own Prometheus
// metrics: how many full and partial syncs it finished between the create
// and the node's datapath seeing the Service, and how long each took. That
// is what tells a trial answered after a partial sync of the one Service
// from one that waited for a full resync of every Service.
//
// kube-proxy serves its metrics on 127.0.0.1:10249 by default (k8slab and
// kubeadm alike), so the API server's node proxy (/api/v1/nodes/NODE:10249/
// proxy/metrics dials the node's InternalIP) cannot reach them: it is
// refused. A watcher pod per node on the host network reads them instead,
// as the node probe reads /proxyMode, and prints each change as a JSON line
// that the runner reads from its log, as it reads the agents' edges: no
// other permission than a run already needs.

// Watcher defaults: a read every 250 ms (sync ends come from kube-proxy's
// own timestamp, so the interval only decides how often two syncs fall
// between two reads), and a line at least every second, so the runner
// knows the watcher has read past a trial's end.
const (
	KubeProxyWatchInterval = 250 * time.Millisecond
	kubeProxyHeartbeat     = time.Second
	roleLatencyProxy       = "latency-proxy"
)

// kube-proxy's metrics the watcher reads (v1.28 and later have the full
// and partial histograms, in iptables and nftables mode).
const (
	metricFullSync    = "kubeproxy_sync_full_proxy_rules_duration_seconds"
	metricPartialSync = "kubeproxy_sync_partial_proxy_rules_duration_seconds"
	metricLastSync    = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	metricProgramming = "kubeproxy_network_programming_duration_seconds"
)

// KubeProxySnapshot is one read of kube-proxy's metrics, as the watcher
// prints it: the full and partial sync histograms' counts and sums
// (seconds), the last sync's end (Unix seconds) and the network-programming
// histogram's count and sum.
type KubeProxySnapshot struct {
	At          int64   `json:"kube_proxy_at"` // Unix ns, the watcher's clock
	Full        uint64  `json:"full"`
	FullSum     float64 `json:"full_sum"`
	Partial     uint64  `json:"partial"`
	PartialSum  float64 `json:"partial_sum"`
	LastSync    float64 `json:"last_sync"`
	Programming uint64  `json:"programming"`
	ProgSum     float64 `json:"programming_sum"`
	// Err says why this read has no figures.
	Err string `json:"err,omitempty"`
}

// ErrNoKubeProxyMetrics: the metrics text lacks a metric the watcher needs.
var ErrNoKubeProxyMetrics = errors.New("kube-proxy metrics incomplete")

// ParseKubeProxyMetrics reads kube-proxy's /metrics text. The histograms
// are summed over their label sets (one per IP family where kube-proxy
// labels them).
func ParseKubeProxyMetrics(r io.Reader) (KubeProxySnapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return KubeProxySnapshot{}, fmt.Errorf("kube-proxy metrics: %w", err)
	}
	var s KubeProxySnapshot
	var missing []string
	hist := func(name string, count *uint64, sum *float64) {
		f := fams[name]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
			missing = append(missing, name)
			return
		}
		for _, m := range f.GetMetric() {
			*count += m.GetHistogram().GetSampleCount()
			*sum += m.GetHistogram().GetSampleSum()
		}
	}
	hist(metricFullSync, &s.Full, &s.FullSum)
	hist(metricPartialSync, &s.Partial, &s.PartialSum)
	hist(metricProgramming, &s.Programming, &s.ProgSum)
	if f := fams[metricLastSync]; f != nil && len(f.GetMetric()) > 0 {
		for _, m := range f.GetMetric() {
			s.LastSync = max(s.LastSync, m.GetGauge().GetValue())
		}
	} else {
		missing = append(missing, metricLastSync)
	}
	if len(missing) > 0 {
		return s, fmt.Errorf("%w: no %s (kube-proxy v1.28 or later has them)", ErrNoKubeProxyMetrics, strings.Join(missing, ", "))
	}
	return s, nil
}

// WatchKubeProxy reads http://addr/metrics every interval until ctx ends
// and prints a snapshot line when a count, the last sync or the error
// changed, and at least every second.
func WatchKubeProxy(ctx context.Context, addr string, interval time.Duration, out io.Writer) error {
	if interval <= 0 {
		interval = KubeProxyWatchInterval
	}
	enc := json.NewEncoder(out)
	var last KubeProxySnapshot
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s := readKubeProxy(ctx, addr)
		if ctx.Err() != nil {
			return nil
		}
		if s.At-last.At >= int64(kubeProxyHeartbeat) || s.Full != last.Full || s.Partial != last.Partial ||
			s.LastSync != last.LastSync || s.Programming != last.Programming || s.Err != last.Err {
			if err := enc.Encode(s); err != nil {
				return err
			}
			last = s
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func readKubeProxy(ctx context.Context, addr string) KubeProxySnapshot {
	at := time.Now().UnixNano()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return KubeProxySnapshot{At: at, Err: err.Error()}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return KubeProxySnapshot{At: at, Err: fmt.Sprintf("no kube-proxy metrics on %s: %v", addr, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return KubeProxySnapshot{At: at, Err: fmt.Sprintf("kube-proxy's /metrics on %s answered %d", addr, resp.StatusCode)}
	}
	s, err := ParseKubeProxyMetrics(resp.Body)
	s.At = at
	if err != nil {
		s.Err = err.Error()
	}
	return s
}

// ParseKubeProxySnapshots reads a watcher's log; other lines are skipped.
func ParseKubeProxySnapshots(b []byte) []KubeProxySnapshot {
	var out []KubeProxySnapshot
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); !strings.HasPrefix(line, "{") {
			continue
		}
		var s KubeProxySnapshot
		if err := json.Unmarshal([]byte(line), &s); err == nil && s.At > 0 {
			out = append(out, s)
		}
	}
	return out
}

// KubeProxySyncsIn is what kube-proxy did in one trial on one node, from
// the watcher's snapshots (in the order printed): the window runs from the
// last read before sent to the first read KubeProxyStampLag after seen
// (the node's datapath seeing the change; the trial's end when it never
// did, ok false); its syncs are counted as CountSyncsBetween says.
func KubeProxySyncsIn(snaps []KubeProxySnapshot, sent, created, seen time.Time, ok bool) *result.KubeProxySyncs {
	ms := func(ns int64) float64 { return float64(ns-created.UnixNano()) / 1e6 }
	from, to := -1, -1
	for i, s := range snaps {
		if s.At <= sent.UnixNano() {
			from = i
		}
		if to < 0 && s.At >= seen.Add(KubeProxyStampLag).UnixNano() {
			to = i
		}
	}
	switch {
	case from < 0:
		return &result.KubeProxySyncs{Error: "kube-proxy's metrics were not read before the create"}
	case to < 0:
		return &result.KubeProxySyncs{Error: "kube-proxy's metrics were not read after the datapath saw the change"}
	case snaps[from].Err != "":
		return &result.KubeProxySyncs{Error: snaps[from].Err}
	case snaps[to].Err != "":
		return &result.KubeProxySyncs{Error: snaps[to].Err}
	}
	k := &result.KubeProxySyncs{FromMs: ms(snaps[from].At), ToMs: ms(snaps[to].At)}
	// The latest full sync before the window.
	for i := from; i > 0; i-- {
		if a, b := snaps[i-1], snaps[i]; a.Err == "" && b.Err == "" && b.Full > a.Full {
			end := ms(int64(b.LastSync * 1e9))
			k.LastFullMs = &end
			break
		}
	}
	prev := snaps[from]
	for _, s := range snaps[from+1 : to+1] {
		if s.Err != "" {
			continue // a failed read in between: the next good one covers it
		}
		endNs := int64(math.Round(s.LastSync * 1e9))
		add := func(kind string, n uint64, sum float64) {
			if n > 0 {
				k.Syncs = append(k.Syncs, result.KubeProxySync{Kind: kind, Count: int(n), EndMs: ms(endNs), DurationMs: sum / float64(n) * 1e3})
			}
		}
		add("full", s.Full-prev.Full, s.FullSum-prev.FullSum)
		add("partial", s.Partial-prev.Partial, s.PartialSum-prev.PartialSum)
		prev = s
	}
	var seenMs *float64
	if ok {
		v := ms(seen.UnixNano())
		seenMs = &v
	}
	CountSyncsBetween(k, ms(sent.UnixNano()), seenMs)
	last := snaps[to]
	if n := last.Programming - snaps[from].Programming; n > 0 {
		mean := (last.ProgSum - snaps[from].ProgSum) / float64(n) * 1e3
		k.ProgrammingCount, k.ProgrammingMeanMs = int(n), &mean
	}
	return k
}

// KubeProxyStampLag bounds how long after the rules take effect kube-proxy
// stamps a sync's end (kubeproxy_sync_proxy_rules_last_timestamp_seconds
// is set right after iptables-restore or the nft transaction returns): on
// k8slab at 10,000 Services the sync whose stamp came next after a node's
// datapath saw the Service stamped 5 ms before to 90 ms after it, in both
// modes. A sync's start cannot tell it instead: its duration also covers
// the work after the stamp (conntrack cleanup), so end − duration comes
// out too early by an unknown amount.
const KubeProxyStampLag = 150 * time.Millisecond

// CountSyncsBetween marks the syncs of k that programmed the change and
// counts them: those kube-proxy stamped within two probe intervals before
// and KubeProxyStampLag after the node's datapath saw it (seenMs); nil
// seenMs (never seen): every sync stamped after the request left (sentMs).
// Times in ms from created.
func CountSyncsBetween(k *result.KubeProxySyncs, sentMs float64, seenMs *float64) {
	k.FullSyncs, k.PartialSyncs = 0, 0
	for i := range k.Syncs {
		s := &k.Syncs[i]
		if seenMs == nil {
			s.Between = s.EndMs >= sentMs
		} else {
			s.Between = s.EndMs >= *seenMs-2*float64(ProbeInterval)/1e6 && s.EndMs <= *seenMs+float64(KubeProxyStampLag)/1e6
		}
		switch {
		case !s.Between:
		case s.Kind == "full":
			k.FullSyncs += s.Count
		default:
			k.PartialSyncs += s.Count
		}
	}
}

// proxyWatcherPod is the kube-proxy watcher for one node: the host network
// (kube-proxy's metrics listen on the node's loopback), nobody, no
// capabilities, tolerating every taint like the node probe.
func (lr *latencyRun) proxyWatcherPod(name, node string) *corev1.Pod {
	pod := lr.po.basePod(name, scenarioLatency, roleLatencyProxy, Placement{HostNetwork: true}, node)
	pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	pod.Spec.Containers[0].Args = []string{"k8s", "latency-agent", "--kube-proxy-metrics", KubeProxyMetricsAddr}
	pod.Spec.Containers[0].Env = nil
	return pod
}

// startProxyWatchers starts a watcher on every node, node -> pod, and
// waits for them to run. A watcher that does not start leaves its node's
// trials without kube-proxy figures, with the reason (why); the
// measurement goes on.
func (lr *latencyRun) startProxyWatchers(ctx context.Context) (pods, why map[string]string) {
	pods, why = map[string]string{}, map[string]string{}
	api := lr.r.Client.CoreV1().Pods(lr.po.Namespace)
	for i, n := range lr.nodes {
		name := runid.Name(lr.po.RunID, fmt.Sprintf("lat-proxy-%d", i))
		if _, err := api.Create(ctx, lr.proxyWatcherPod(name, n), metav1.CreateOptions{}); err != nil {
			why[n] = APIError("create", "kube-proxy watcher pod", err).Error()
			continue
		}
		pods[n] = name
	}
	for n, name := range pods {
		if _, err := lr.r.waitPod(ctx, lr.po.Namespace, name, lr.o.ReadyTimeout, podReady); err != nil {
			why[n] = fmt.Sprintf("kube-proxy watcher pod %s: %v", name, err)
			delete(pods, n)
		}
	}
	for n, w := range why {
		fmt.Fprintf(lr.o.Log, "service: no kube-proxy figures from %s: %s\n", n, w)
	}
	return pods, why
}

// proxySyncs adds to t, per node, what kube-proxy did during it: it waits
// (up to a few heartbeats) until each watcher has read KubeProxyStampLag
// past the node's instant, then reads its log.
func (lr *latencyRun) proxySyncs(ctx context.Context, t *Trial, pods, why map[string]string) error {
	end := time.Now()
	for i := range t.Nodes {
		nd := &t.Nodes[i]
		if w, ok := why[nd.Node]; ok {
			nd.KubeProxy = &result.KubeProxySyncs{Error: w}
			continue
		}
		seen, ok := end, nd.LatencyNs != nil
		if ok {
			seen = t.CreatedAt.Add(time.Duration(*nd.LatencyNs))
		}
		var snaps []KubeProxySnapshot
		err := pollUntil(ctx, lr.poll(), 3*kubeProxyHeartbeat, func() (bool, error) {
			b, err := lr.r.logs(ctx, lr.po.Namespace, pods[nd.Node], containerName)
			if err != nil {
				return false, fmt.Errorf("read the log of kube-proxy watcher %s: %w", pods[nd.Node], err)
			}
			snaps = ParseKubeProxySnapshots(b)
			return len(snaps) > 0 && snaps[len(snaps)-1].At >= seen.Add(KubeProxyStampLag).UnixNano(), nil
		})
		if err != nil && !errors.Is(err, errPollTimeout) {
			return err
		}
		nd.KubeProxy = KubeProxySyncsIn(snaps, t.SentAt, t.CreatedAt, seen, ok)
	}
	t.KubeProxySync = slowestSync(*t)
	return nil
}

// Groups of a Service trial by what kube-proxy did on the slowest node
// (result.ControlPlane.KubeProxySync).
const (
	SyncFull    = "full"
	SyncPartial = "partial"
	SyncNone    = "none"
)

// slowestSync says what stood between the create and the datapath on the
// slowest node (the one the trial's latency is): a full sync, partial ones
// only, or none; "" without a latency or that node's kube-proxy figures.
func slowestSync(t Trial) string {
	if t.LatencyNs == nil {
		return ""
	}
	for _, nd := range t.Nodes {
		if nd.LatencyNs != nil && *nd.LatencyNs == *t.LatencyNs {
			switch k := nd.KubeProxy; {
			case k == nil || k.Error != "":
				return ""
			case k.FullSyncs > 0:
				return SyncFull
			case k.PartialSyncs > 0:
				return SyncPartial
			}
			return SyncNone
		}
	}
	return ""
}

// syncGroups names SplitByKubeProxySync's groups, in its order.
var syncGroups = []struct{ key, name string }{
	{SyncPartial, "partial syncs only"},
	{SyncFull, "full sync between"},
	// No sync at all: the ClusterIP answered with rules kube-proxy had
	// not rewritten since the previous trial, so the "deleted" state the
	// trial started from was not the Service's removal from the datapath.
	{SyncNone, "no sync between"},
	{"", "kube-proxy not read"},
}

// SplitByKubeProxySync is the Service trials' distribution in groups by
// what kube-proxy did on the slowest node between the create and its
// datapath (Trial.KubeProxySync): each group's Test is
// "svc_latency: <group>"; a group with no trial is left out.
func SplitByKubeProxySync(trials []Trial) []LatencyStats {
	var out []LatencyStats
	for _, g := range syncGroups {
		if ts := syncGroup(trials, g.key); len(ts) > 0 {
			s := SummarizeLatency(ts)[0]
			s.Test = result.SvcLatency + ": " + g.name
			out = append(out, s)
		}
	}
	return out
}

// syncGroup is the Service trials with a latency in group key.
func syncGroup(trials []Trial, key string) []Trial {
	var out []Trial
	for _, t := range trials {
		if t.Test == result.SvcLatency && t.LatencyNs != nil && t.KubeProxySync == key {
			out = append(out, t)
		}
	}
	return out
}

// KubeProxyFullSyncs is, per node, how often kube-proxy finished a full
// sync while the Service trials ran: the distinct full-sync ends the
// trials saw (in their windows and as the last before each), and the
// intervals between consecutive ones. A full sync between two trials that
// is followed by another before the next trial is not seen, so an
// interval may span two.
type KubeProxyFullSyncs struct {
	Node        string       `json:"node"`
	Seen        int          `json:"full_syncs_seen"`
	IntervalsS  []float64    `json:"intervals_s,omitempty"`
	MedianS     *float64     `json:"median_interval_s,omitempty"`
	MedianCI    *cnbstats.CI `json:"median_interval_ci_s,omitempty"`
	MeanFullMs  *float64     `json:"mean_full_sync_ms,omitempty"`
	MeanPartial *float64     `json:"mean_partial_sync_ms,omitempty"`
}

// SummarizeKubeProxy makes KubeProxyFullSyncs for every node of the
// Service trials that has kube-proxy figures.
func SummarizeKubeProxy(trials []Trial) []KubeProxyFullSyncs {
	ends := map[string]map[int64]bool{}
	durs := map[string][2][]float64{}
	var nodes []string
	for _, t := range trials {
		if t.Test != result.SvcLatency {
			continue
		}
		for _, nd := range t.Nodes {
			k := nd.KubeProxy
			if k == nil || k.Error != "" {
				continue
			}
			if ends[nd.Node] == nil {
				ends[nd.Node] = map[int64]bool{}
				nodes = append(nodes, nd.Node)
			}
			at := func(ms float64) int64 {
				return t.CreatedAt.Add(time.Duration(ms * 1e6)).Round(time.Millisecond).UnixMilli()
			}
			if k.LastFullMs != nil {
				ends[nd.Node][at(*k.LastFullMs)] = true
			}
			d := durs[nd.Node]
			for _, s := range k.Syncs {
				// A mean over Count syncs weighs as Count of them.
				i := 1
				if s.Kind == "full" {
					ends[nd.Node][at(s.EndMs)] = true
					i = 0
				}
				for range s.Count {
					d[i] = append(d[i], s.DurationMs)
				}
			}
			durs[nd.Node] = d
		}
	}
	var out []KubeProxyFullSyncs
	for _, n := range nodes {
		var at []int64
		for e := range ends[n] {
			at = append(at, e)
		}
		slices.Sort(at)
		s := KubeProxyFullSyncs{Node: n, Seen: len(at)}
		for i := 1; i < len(at); i++ {
			s.IntervalsS = append(s.IntervalsS, float64(at[i]-at[i-1])/1e3)
		}
		if len(s.IntervalsS) > 0 {
			med, ci := cnbstats.Median(s.IntervalsS), cnbstats.MedianCI(s.IntervalsS, 0.95)
			s.MedianS, s.MedianCI = &med, &ci
		}
		if d := durs[n][0]; len(d) > 0 {
			m := cnbstats.Mean(d)
			s.MeanFullMs = &m
		}
		if d := durs[n][1]; len(d) > 0 {
			m := cnbstats.Mean(d)
			s.MeanPartial = &m
		}
		out = append(out, s)
	}
	return out
}

// SyncBegunAfter reports whether the snapshots show a kube-proxy sync that
// began at or after t (Unix time): from two reads with syncs between them,
// the last sync's start is at least the last stamp less the durations of
// all of them, a bound that is exact for one sync and early for more.
func SyncBegunAfter(snaps []KubeProxySnapshot, t time.Time) bool {
	var prev *KubeProxySnapshot
	after := float64(t.UnixNano()) / 1e9
	for i := range snaps {
		s := &snaps[i]
		if s.Err != "" {
			continue
		}
		if prev != nil && s.Full+s.Partial > prev.Full+prev.Partial {
			dur := (s.FullSum + s.PartialSum) - (prev.FullSum + prev.PartialSum)
			if s.LastSync-dur >= after {
				return true
			}
		}
		prev = s
	}
	return false
}

// waitProxySynced waits until kube-proxy on every watched node has
// finished a sync begun after deleted, the instant the API server answered
// a Service's delete: only then are the deleted Service's rules gone. The
// agents' probes alone cannot tell: at 10,000 Services a probe that times
// out while a sync keeps both CPUs busy reads as "gone" while the rules
// still answer, and the next trial's Service then answers with no
// programming at all (docs/kubernetes.md). A node whose kube-proxy cannot
// be read is not waited for (its trials say why they have no figures).
func (lr *latencyRun) waitProxySynced(ctx context.Context, pods map[string]string, deleted time.Time) error {
	for node, pod := range pods {
		readable := true
		err := pollUntil(ctx, lr.poll(), lr.o.TrialTimeout, func() (bool, error) {
			b, err := lr.r.logs(ctx, lr.po.Namespace, pod, containerName)
			if err != nil {
				return false, fmt.Errorf("read the log of kube-proxy watcher %s: %w", pod, err)
			}
			snaps := ParseKubeProxySnapshots(b)
			if n := len(snaps); n > 0 && snaps[n-1].Err != "" {
				readable = false
				return true, nil
			}
			return SyncBegunAfter(snaps, deleted), nil
		})
		if errors.Is(err, errPollTimeout) {
			return fmt.Errorf("kube-proxy on %s finished no sync begun after the Service's delete within %s", node, lr.o.TrialTimeout)
		}
		if err != nil {
			return err
		}
		if !readable {
			fmt.Fprintf(lr.o.Log, "service: kube-proxy on %s unreadable; the next trial starts on its agents' word alone\n", node)
		}
	}
	return nil
}
