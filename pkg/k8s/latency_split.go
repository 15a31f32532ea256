package k8s

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/cnibench/cnibench/pkg/errkind"
	cnbstats "github.com/cnibench/cnibench/pkg/stats"
)

// `cnibench k8s latency --summarize A.json [--summarize B.json]`: the
// Service trials of `k8s latency --json` documents split by what kube-proxy
// did (latency_proxy.go), without a cluster, and with two documents B
// judged against A per group: `cnibench compare` judges two stored runs'
// trials as one distribution, which says nothing when one mode's trials
// mix two different things.

// LatencyDoc is the part of a `k8s latency --json` document read back.
type LatencyDoc struct {
	Schema  string   `json:"schema"`
	Run     string   `json:"run"`
	Cluster *Cluster `json:"cluster"`
	Trials  []Trial  `json:"trials"`
}

// ReadLatencyDoc reads one document; which syncs stood between and the
// trials' kube-proxy group are recomputed from each node's syncs, so a
// document written by an earlier version is read as this one counts.
func ReadLatencyDoc(path string) (LatencyDoc, error) {
	var d LatencyDoc
	b, err := os.ReadFile(path)
	if err != nil {
		return d, errkind.Errorf(ErrInvalid, "--summarize %s: %v", path, err)
	}
	if err := json.Unmarshal(b, &d); err != nil || d.Schema != "cnibench.k8s-latency/v1" {
		return d, errkind.Errorf(ErrInvalid, "--summarize %s: not a `cnibench k8s latency --json` document (schema %q, %v)", path, d.Schema, err)
	}
	for i := range d.Trials {
		t := &d.Trials[i]
		sentMs := float64(t.SentAt.Sub(t.CreatedAt)) / 1e6
		for _, nd := range t.Nodes {
			if nd.KubeProxy != nil && nd.KubeProxy.Error == "" {
				var seen *float64
				if nd.LatencyNs != nil {
					v := *nd.LatencyNs / 1e6
					seen = &v
				}
				CountSyncsBetween(nd.KubeProxy, sentMs, seen)
			}
		}
		t.KubeProxySync = slowestSync(*t)
	}
	return d, nil
}

// judgedGroups are the groups two documents are judged on: every trial,
// those a sync stood between (what kube-proxy's programming cost), and
// each group alone.
var judgedGroups = []struct {
	name string
	keys []string
}{
	{"all trials", nil},
	{"a sync between (partial or full)", []string{SyncPartial, SyncFull}},
	{"partial syncs only", []string{SyncPartial}},
	{"full sync between", []string{SyncFull}},
	{"no sync between", []string{SyncNone}},
}

// groupMs is the latencies (ms) of the Service trials in keys (nil: all).
func groupMs(trials []Trial, keys []string) []float64 {
	var out []float64
	for _, g := range syncGroups {
		if keys != nil && !slices.Contains(keys, g.key) {
			continue
		}
		for _, t := range syncGroup(trials, g.key) {
			out = append(out, *t.LatencyNs/1e6)
		}
	}
	return out
}

// SummarizeLatencyDocs prints each document's Service trials by group and
// its kube-proxy's full syncs, then, with two, B against A per group
// (pkg/stats.Judge: Mann–Whitney and the ±5 % equivalence test).
func SummarizeLatencyDocs(out io.Writer, paths []string) error {
	if len(paths) == 0 || len(paths) > 2 {
		return errkind.Errorf(ErrInvalid, "--summarize given %d times: give one document, or two to judge the second against the first", len(paths))
	}
	var docs []LatencyDoc
	for _, p := range paths {
		d, err := ReadLatencyDoc(p)
		if err != nil {
			return err
		}
		docs = append(docs, d)
	}
	for i, d := range docs {
		mode := "?"
		if d.Cluster != nil {
			mode = d.Cluster.KubeProxyMode
		}
		fmt.Fprintf(out, "%c: %s (run %s, kube-proxy %s)\n", 'A'+i, paths[i], d.Run, mode)
		if err := WriteLatencyTable(out, append(SummarizeLatency(d.Trials)[:1], SplitByKubeProxySync(d.Trials)...)); err != nil {
			return err
		}
		for _, k := range SummarizeKubeProxy(d.Trials) {
			fmt.Fprintf(out, "kube-proxy on %s: %d full syncs seen", k.Node, k.Seen)
			if k.MeanPartial != nil {
				fmt.Fprintf(out, ", mean partial sync %.0f ms", *k.MeanPartial)
			}
			if k.MeanFullMs != nil {
				fmt.Fprintf(out, ", mean full sync %.0f ms", *k.MeanFullMs)
			}
			fmt.Fprintln(out)
		}
	}
	if len(docs) < 2 {
		return nil
	}
	fmt.Fprintln(out, "B against A, svc_latency by what kube-proxy did on the slowest node:")
	for _, g := range judgedGroups {
		a, b := groupMs(docs[0].Trials, g.keys), groupMs(docs[1].Trials, g.keys)
		if len(a) == 0 || len(b) == 0 {
			fmt.Fprintf(out, "  %s: A %d, B %d trials: not judged (a side has none)\n", g.name, len(a), len(b))
			continue
		}
		v := cnbstats.Judge(a, b, false)
		fmt.Fprintf(out, "  %s: A %.1f ms (%d), B %.1f ms (%d): B %s\n", g.name, v.MedianA, len(a), v.MedianB, len(b), v.Text("faster", "slower"))
	}
	return nil
}
