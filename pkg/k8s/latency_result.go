package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
	cnbstats "github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/units"
)

// The bookkeeping of `k8s latency`, apart from the cluster: a trial from
// the agents' edges, the distribution of a kind's trials, the stored run
// and the printed table.

// LatencyTrial makes trial n of test from each node's edges (of the one
// target, in the order the prober printed them): a node's latency is the
// start of its first attempt in the wanted state (ok) that started after
// the request was sent, minus created, the instant the API server's answer
// arrived; the trial's is the slowest node's. A node without such an
// attempt fails the trial: it then has no latency at all.
func LatencyTrial(test string, n int, nodes []string, byNode map[string][]Edge, ok bool, sent, created time.Time) Trial {
	t := Trial{Test: test, N: n, SentAt: sent, CreatedAt: created}
	want := "success"
	if !ok {
		want = "refusal"
	}
	// Every node may have seen the change before the create's answer
	// arrived: the slowest is then negative, not 0.
	slowest := math.Inf(-1)
	var failed []string
	for _, node := range nodes {
		nl := result.ControlPlaneNode{Node: node}
		var last int64 // the latest attempt before the change, in the old state
		for _, e := range byNode[node] {
			if e.At < sent.UnixNano() {
				continue
			}
			if e.OK != ok {
				last = e.At // a change back, e.g. the old state seen after the send
				continue
			}
			lat := float64(e.At - created.UnixNano())
			res := float64(e.At - max(e.Prev, last, created.UnixNano()))
			nl.LatencyNs, nl.ResolutionNs = &lat, &res
			break
		}
		if nl.LatencyNs == nil {
			nl.Error = "no " + want + " seen"
			failed = append(failed, node)
		} else {
			slowest = max(slowest, *nl.LatencyNs)
		}
		t.Nodes = append(t.Nodes, nl)
	}
	if len(failed) > 0 {
		t.Error = fmt.Sprintf("no %s from %s", want, strings.Join(failed, ", "))
		return t
	}
	t.LatencyNs = &slowest
	return t
}

// LatencyStats is one test's distribution over its trials.
type LatencyStats struct {
	Test   string `json:"test"`
	Trials int    `json:"trials"`
	// OK trials have a latency; Failed ones timed out or broke; Missing
	// says why the test could not be measured at all.
	OK      int    `json:"ok"`
	Failed  int    `json:"failed"`
	Missing string `json:"missing,omitempty"`
	// FirstError is the first failed trial's reason.
	FirstError string `json:"first_error,omitempty"`
	// In milliseconds, over the OK trials; nil without any.
	MedianMs *float64     `json:"median_ms"`
	P90Ms    *float64     `json:"p90_ms"`
	MaxMs    *float64     `json:"max_ms"`
	MedianCI *cnbstats.CI `json:"median_ci_ms,omitempty"`
}

// SummarizeLatency makes each test's distribution, in the order of
// result.ControlPlaneTests.
func SummarizeLatency(trials []Trial) []LatencyStats {
	var out []LatencyStats
	for _, test := range result.ControlPlaneTests {
		s := LatencyStats{Test: test}
		var ms []float64
		for _, t := range trials {
			if t.Test != test {
				continue
			}
			s.Trials++
			switch {
			case t.Missing:
				s.Missing = t.Error
			case t.LatencyNs != nil:
				s.OK++
				ms = append(ms, *t.LatencyNs/1e6)
			default:
				s.Failed++
				if s.FirstError == "" {
					s.FirstError = fmt.Sprintf("trial %d: %s", t.N, t.Error)
				}
			}
		}
		if s.Trials == 0 {
			continue
		}
		if len(ms) > 0 {
			med, p90, mx := cnbstats.Median(ms), cnbstats.Percentile(ms, 90), slices.Max(ms)
			ci := cnbstats.MedianCI(ms, 0.95)
			s.MedianMs, s.P90Ms, s.MaxMs, s.MedianCI = &med, &p90, &mx, &ci
		}
		out = append(out, s)
	}
	return out
}

// WriteLatencyTable prints the distributions, one row per test.
func WriteLatencyTable(w io.Writer, sums []LatencyStats) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "test\ttrials\tok\tmedian (ms)\t95% CI of median\tp90 (ms)\tmax (ms)\t")
	ms := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatFloat(*p, 'f', 1, 64)
	}
	var notes []string
	for _, s := range sums {
		ci := "-"
		if s.MedianCI != nil {
			ci = fmt.Sprintf("%.1f–%.1f (%.0f %%)", s.MedianCI.Low, s.MedianCI.High, s.MedianCI.Level*100)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t\n", s.Test, s.Trials, s.OK, ms(s.MedianMs), ci, ms(s.P90Ms), ms(s.MaxMs))
		switch {
		case s.Missing != "":
			notes = append(notes, fmt.Sprintf("%s: missing: %s", s.Test, s.Missing))
		case s.Failed > 0:
			notes = append(notes, fmt.Sprintf("%s: %d of %d trials failed; first: %s", s.Test, s.Failed, s.Trials, s.FirstError))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return nil
}

// KindK8sLatency is the stored kind of a latency run.
const KindK8sLatency = "k8s-latency"

// latencyArm is the one arm of a stored latency run: the cluster, so two
// runs (iptables and nftables, 0 and 10,000 Services) compare arm to arm.
const latencyArm = "cluster"

// StoreLatencyRun describes a latency run for the results store: kind
// k8s-latency, one arm, one test per measured kind, the cluster's
// fingerprint and labels as a k8s run has them.
func StoreLatencyRun(runID string, cl *Cluster, o LatencyOptions, version, experiment string) *store.Run {
	desc := fmt.Sprintf("control plane to datapath on %d node(s)", len(cl.Nodes))
	if o.Services > 0 {
		desc += fmt.Sprintf(", behind %d other Services", o.Services)
	}
	labels := clusterLabels(cl)
	labels["k8s.namespace"], labels["k8s.image"] = o.Namespace, o.Image
	labels["k8s.services"] = strconv.Itoa(o.Services)
	labels["k8s.trials"] = strconv.Itoa(o.Trials)
	labels["k8s.kinds"] = strings.Join(o.Kinds, ",")
	labels["k8s.probe_interval"] = ProbeInterval.String()
	return &store.Run{
		Name: runid.Name(runID, KindK8sLatency), Kind: KindK8sLatency, Experiment: experiment,
		Host: clusterFingerprint(cl, version), Labels: labels,
		Arms: []store.Arm{{Name: latencyArm, Description: desc, Topology: "k8s/latency", Engine: "builtin"}},
	}
}

// LatencySample is trial t as a stored sample: a result with its
// ControlPlane section, or a failed sample with the reason.
func LatencySample(runID int64, seq int, t Trial, version string) *store.Sample {
	s := &store.Sample{RunID: runID, Seq: seq, Arm: latencyArm, Engine: "builtin", Test: t.Test, Repeat: t.N}
	if t.LatencyNs == nil {
		s.Error = t.Error
		return s
	}
	r := result.New(result.Tool{Name: "cnibench", Version: version}, t.Test, 0)
	r.Start = t.CreatedAt
	r.DurationSeconds = *t.LatencyNs / 1e9
	r.ControlPlane = &result.ControlPlane{Object: latencyObject(t.Test), SentAt: t.SentAt, CreatedAt: t.CreatedAt,
		LatencyNs: t.LatencyNs, Nodes: t.Nodes, KubeProxySync: t.KubeProxySync}
	s.Result = r
	return s
}

func latencyObject(test string) string {
	switch test {
	case result.SvcLatency:
		return "service"
	case result.NetpolDenyLatency:
		return "networkpolicy-deny"
	case result.NetpolAllowLatency:
		return "networkpolicy-allow"
	}
	return "pod"
}

// ParseLatencyKinds reads --kinds: a comma list of LatencyKinds, or all.
func ParseLatencyKinds(s string) ([]string, error) {
	if strings.TrimSpace(s) == "all" {
		return slices.Clone(LatencyKinds), nil
	}
	var out []string
	for _, k := range units.SplitList(s) {
		if !slices.Contains(LatencyKinds, k) {
			return nil, errkind.Errorf(ErrInvalid, "--kinds %q: unknown kind %q; choose from %s, or all", s, k, strings.Join(LatencyKinds, ", "))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, errkind.Errorf(ErrInvalid, "--kinds is empty; choose from %s, or all", strings.Join(LatencyKinds, ", "))
	}
	// Always in LatencyKinds' order, whatever the order given.
	slices.SortFunc(out, func(a, b string) int { return slices.Index(LatencyKinds, a) - slices.Index(LatencyKinds, b) })
	return out, nil
}

// LatencyHelp is `cnibench k8s latency --help`'s description.
const LatencyHelp = `One agent pod per node connects to the target every 5ms; a trial is the time
from the API server's answer to the create until the first attempt that sees
the change, on the slowest node (docs/kubernetes.md). Compare two stored runs
with 'cnibench compare A B'.`

// LatencyCommand is `cnibench k8s latency` as given.
type LatencyCommand struct {
	Cluster          ClusterFlags
	Trials, Services int
	Kinds            string
	Timeout          time.Duration // per trial
	ReadyTimeout     time.Duration
	JSON, Keep       bool
	DBPath, Version  string
	Experiment       string
	// Summarize: instead of measuring, SummarizeLatencyDocs of these.
	Summarize []string
}

// Options checks the flags (every error an ErrInvalid) and returns the
// run's options, the cluster's part left to Run.
func (c LatencyCommand) Options() (LatencyOptions, error) {
	kinds, err := ParseLatencyKinds(c.Kinds)
	switch {
	case err != nil:
		return LatencyOptions{}, err
	case c.Trials < 1 || c.Trials > MaxTrials:
		return LatencyOptions{}, errkind.Errorf(ErrInvalid, "--trials %d: must be 1-%d", c.Trials, MaxTrials)
	case c.Services < 0 || c.Services > MaxServices:
		return LatencyOptions{}, errkind.Errorf(ErrInvalid, "--services %d: must be 0-%d", c.Services, MaxServices)
	case c.Timeout < time.Second:
		return LatencyOptions{}, errkind.Errorf(ErrInvalid, "--timeout %s: a trial needs at least 1s", c.Timeout)
	}
	return LatencyOptions{Kinds: kinds, Trials: c.Trials, Services: c.Services, TrialTimeout: c.Timeout,
		ReadyTimeout: c.ReadyTimeout, Keep: c.Keep}, nil
}

// Run checks the flags, measures on the flags' cluster while storing each
// trial in the results database, and prints the distributions (or, with
// JSON, every trial) to out. A run with failed trials is stored and printed,
// then returns how many failed.
func (c LatencyCommand) Run(ctx context.Context, out, log io.Writer) error {
	if len(c.Summarize) > 0 {
		return SummarizeLatencyDocs(out, c.Summarize)
	}
	o, err := c.Options()
	if err != nil {
		return err
	}
	if o.Image, o.PullPolicy, err = c.Cluster.ResolveImage(c.Version); err != nil {
		return err
	}
	o.Namespace, o.Log = c.Cluster.Namespace, log
	podDefaults(&o.Namespace, &o.PullPolicy, &o.Log)
	conn, cl, nodes, err := c.Cluster.ConnectFor(ctx, o.Namespace, o.Services)
	if err != nil {
		return err
	}
	db, err := store.Open(c.DBPath)
	if err != nil {
		return err
	}
	defer db.Close()
	r := &Runner{Client: conn.Client, Bulk: conn.Bulk, RunID: runid.New()}
	trials, stored, runErr := r.RecordLatency(ctx, cl, nodes, o, store.Recorder{DB: db}, c.Version, c.Experiment)
	if stored.RunID == 0 {
		return runErr
	}
	fmt.Fprintf(log, "stored %d trial(s) as run %d (%s) in %s; compare two such runs with: cnibench compare %s <other run>\n",
		len(trials), stored.RunID, stored.Name, db.Path(), stored.Name)
	sums := SummarizeLatency(trials)
	split, kp := SplitByKubeProxySync(trials), SummarizeKubeProxy(trials)
	if c.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(struct {
			Schema  string         `json:"schema"`
			Run     string         `json:"run"`
			Cluster *Cluster       `json:"cluster"`
			Summary []LatencyStats `json:"summary"`
			// BySync and KubeProxy: the Service trials by what kube-proxy
			// did (latency_proxy.go).
			BySync    []LatencyStats       `json:"by_kube_proxy_sync,omitempty"`
			KubeProxy []KubeProxyFullSyncs `json:"kube_proxy,omitempty"`
			Trials    []Trial              `json:"trials"`
		}{"cnibench.k8s-latency/v1", stored.Name, cl, sums, split, kp, trials})
	} else {
		err = WriteLatencyTable(out, append(sums, split...))
		for _, k := range kp {
			if err == nil && k.MedianS != nil {
				_, err = fmt.Fprintf(out, "kube-proxy on %s: %d full syncs seen, median interval %.1f s [%.1f, %.1f]\n",
					k.Node, k.Seen, *k.MedianS, k.MedianCI.Low, k.MedianCI.High)
			}
		}
	}
	return errors.Join(runErr, err)
}

// RecordLatency runs Latency and stores it through sink as it goes: the
// run, its fingerprint once the nodes are probed, each trial as it ends,
// then whether every trial has a latency.
func (r *Runner) RecordLatency(ctx context.Context, cl *Cluster, nodes []corev1.Node, o LatencyOptions, sink store.Sink, version, experiment string) ([]Trial, Recorded, error) {
	if r.RunID == "" {
		r.RunID = runid.New()
	}
	run := StoreLatencyRun(r.RunID, cl, o, version, experiment)
	var rec Recorded
	var err error
	if rec.RunID, err = sink.Begin(run); err != nil {
		return nil, rec, err
	}
	rec.Name = run.Name
	o.OnProbed = func(cl *Cluster) error {
		run := StoreLatencyRun(r.RunID, cl, o, version, "")
		return sink.Update(rec.RunID, run.Host, run.Labels)
	}
	var trials []Trial
	failed := 0
	runErr := r.Latency(ctx, cl, nodes, o, func(t Trial) error {
		trials = append(trials, t)
		if t.LatencyNs == nil && !t.Missing {
			failed++
		}
		rec.Stored++
		return sink.Add(LatencySample(rec.RunID, rec.Stored, t, version), nil)
	})
	if runErr == nil && failed > 0 {
		runErr = fmt.Errorf("%d of %d trials failed (stored as failures, not latencies)", failed, len(trials))
	}
	complete := runErr == nil && len(trials) > 0 && !slices.ContainsFunc(trials, func(t Trial) bool { return t.Missing })
	status := "ok"
	if runErr != nil {
		status = runErr.Error()
	}
	if err := sink.End(rec.RunID, complete, status); err != nil && runErr == nil {
		runErr = err
	}
	return trials, rec, runErr
}
