package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cnibench/cnibench/pkg/engine"
	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/image"
	"github.com/cnibench/cnibench/pkg/limits"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/units"
)

// RunFlags are the measurement settings of `cnibench k8s run` as given.
type RunFlags struct {
	Scenarios, Tests, MsgSizes string
	Duration, Warmup           time.Duration
	Parallel, Repeats          int
	Services                   int
	Engine                     string
	Profile                    bool
	AgentCPU                   bool
	// PathMTU: each client pod probes its path first (ClientArgs.PathMTU).
	PathMTU bool
	// InspectDatapath: privileged node probes (Options.InspectDatapath).
	InspectDatapath bool
	// SettleIdle (percent, 0 = off): wait before measuring until each
	// client node is at least this idle (see settle.go).
	SettleIdle float64
}

// Options checks the flags — scenarios, tests, every size for every test
// (one client pod runs them all), parallelism, repeats and times — and
// returns the run's options (the cluster's part left to the caller) and
// the sizes. Every error matches ErrInvalid.
func (f RunFlags) Options() (Options, []int, error) {
	bad := func(format string, a ...any) error { return errkind.Errorf(ErrInvalid, format, a...) }
	sc, err := ParseScenarios(f.Scenarios)
	if err != nil {
		return Options{}, nil, bad("--scenarios: %v", err)
	}
	ts := units.SplitList(f.Tests)
	for _, t := range ts {
		if !result.ValidTest(t) {
			return Options{}, nil, bad("--test %q: choose from %s", t, strings.Join(result.Tests, ", "))
		}
	}
	sizes, err := units.ParseSizes(f.MsgSizes)
	if err != nil {
		return Options{}, nil, bad("--msg-size: %v", err)
	}
	for _, t := range ts {
		for _, z := range sizes {
			if err := limits.CheckSize(t, z); err != nil {
				return Options{}, nil, bad("--msg-size for %s: %v (one client pod runs every test at every size: drop the test or the size)", t, err)
			}
		}
	}
	switch {
	case f.Parallel < 1 || f.Parallel > engine.MaxParallel:
		return Options{}, nil, bad("--parallel %d: must be 1-%d", f.Parallel, engine.MaxParallel)
	case f.Repeats < 1:
		return Options{}, nil, bad("--repeats must be at least 1")
	case f.Services < 0 || f.Services > MaxServices:
		return Options{}, nil, bad("--services %d: must be 0-%d", f.Services, MaxServices)
	case f.SettleIdle != 0 && (f.SettleIdle < 1 || f.SettleIdle > 99):
		return Options{}, nil, bad("--settle-idle %g: must be 1-99 (percent of the node's CPUs idle), or 0 for no wait", f.SettleIdle)
	case f.Duration <= 0 || f.Warmup < 0:
		return Options{}, nil, bad("--duration must be positive and --warmup not negative")
	}
	engines, err := ParseEngines(f.Engine, ts, sizes, f.Duration, f.Warmup, f.Parallel)
	if err != nil {
		return Options{}, nil, err
	}
	return Options{
		Scenarios: sc, Repeats: f.Repeats, Services: f.Services, Engines: engines, AgentCPU: f.AgentCPU,
		SettleIdle: f.SettleIdle, InspectDatapath: f.InspectDatapath,
		Client: ClientArgs{Tests: ts, MsgSizes: strings.Join(units.SplitList(f.MsgSizes), ","),
			Duration: f.Duration.String(), Warmup: f.Warmup.String(), Parallel: f.Parallel,
			Profile: f.Profile, PathMTU: f.PathMTU},
		// One client pod runs every test and size back to back; the slack
		// covers pod start, connection setup and a slow node.
		MeasureTimeout: time.Duration(len(ts)*len(sizes))*(f.Duration+f.Warmup)*2 + 2*time.Minute,
	}, sizes, nil
}

// Recorded is what Record measured and stored.
type Recorded struct {
	RunID   int64
	Name    string   // the stored run's name
	Stored  int      // samples stored
	Samples []Sample // every client pod's outcome, for --json
}

// Record executes a prepared plan and stores it through sink as it goes,
// the way the experiment runner stores its steps: the run first, each
// client pod's samples and window profiles as the pod finishes (a failed
// pod as one failed sample per planned test and size), then whether the run
// completed. sizes are the parsed o.Client.MsgSizes; version and
// experiment go into the stored run (StoreRun). Once the run has probed
// its nodes, the run's fingerprint and labels are stored again with what
// the probe found.
func (r *Runner) Record(ctx context.Context, plan *Plan, o Options, sizes []int, sink store.Sink, version, experiment string) (Recorded, error) {
	run := StoreRun(plan, o, version, experiment)
	rec := Recorded{Name: run.Name}
	var err error
	if rec.RunID, err = sink.Begin(run); err != nil {
		return rec, err
	}
	rec.Name = run.Name // Begin may have made it unique
	o.OnProbed = func(*Cluster) error {
		r := StoreRun(plan, o, version, "")
		return sink.Update(rec.RunID, r.Host, r.Labels)
	}
	seq := 0
	runErr := r.Execute(ctx, plan, o, func(s Sample) error {
		rec.Samples = append(rec.Samples, s)
		made := StoreSamples(rec.RunID, s, o.clientArgs(s.Engine).Tests, sizes, s.Engine, &seq)
		profs := map[int]*store.Profile{}
		for _, p := range StoreProfiles(rec.RunID, s, made) {
			profs[p.Seq] = p
		}
		for _, ss := range made {
			if err := sink.Add(ss, profs[ss.Seq]); err != nil {
				return err
			}
			rec.Stored++
		}
		return nil
	})
	status := "ok"
	if runErr != nil {
		status = runErr.Error()
	}
	if err := sink.End(rec.RunID, runErr == nil, status); err != nil && runErr == nil {
		runErr = err
	}
	return rec, runErr
}

// WriteRunJSON prints `k8s run --json`: the plan (with the cluster's
// fingerprint) and every client pod's outcome.
func WriteRunJSON(w io.Writer, plan *Plan, samples []Sample) error {
	if samples == nil {
		samples = []Sample{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Schema  string   `json:"schema"`
		Plan    *Plan    `json:"plan"`
		Samples []Sample `json:"samples"`
	}{"cnibench.k8s-run/v1", plan, samples})
}

// WriteSkipped lists the scenarios the plan skipped, and why.
func WriteSkipped(w io.Writer, plan *Plan) {
	for _, p := range plan.Placements {
		if p.Skip != "" {
			fmt.Fprintf(w, "%s: skipped: %s\n", p.Scenario, p.Skip)
		}
	}
	keys := make([]string, 0, len(plan.EngineSkips))
	for k := range plan.EngineSkips {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s: skipped: %s\n", k, plan.EngineSkips[k])
	}
}

// WriteNodes prints the cluster fingerprint of `k8s info`: context, summary
// and a line per node.
func (c *Cluster) WriteNodes(w io.Writer) error {
	ctx := c.Context
	if ctx == "" {
		ctx = "-"
	}
	fmt.Fprintf(w, "context %s (%s)\n%s\n", ctx, c.Server, c.Summary())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tIP\tKERNEL\tOS\tRUNTIME\tUSABLE")
	for _, n := range c.Nodes {
		u := "yes"
		if n.Unusable != "" {
			u = "no: " + n.Unusable
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.InternalIP, n.Kernel, n.OSImage, n.Runtime, u)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// What each probed node runs, and the BPF programs attached on it.
	for _, p := range c.Probes {
		if p.Error != "" {
			fmt.Fprintf(w, "%s: not probed: %s\n", p.Node, p.Error)
			continue
		}
		kp := p.KubeProxyMode
		if kp == "" {
			kp = p.KubeProxyError
		}
		d := probedDatapath(p)
		fmt.Fprintf(w, "%s: %s (from %s); kube-proxy: %s\n", p.Node, d.Summary(), d.From, kp)
		for _, k := range slices.Sorted(maps.Keys(d.Missing)) {
			fmt.Fprintf(w, "  %s unknown: %s\n", k, d.Missing[k])
		}
		for _, b := range p.BPF {
			fmt.Fprintf(w, "  bpf: %s\n", b)
		}
		if len(p.BPF) == 0 && p.BPFError != "" {
			fmt.Fprintf(w, "  bpf: %s\n", p.BPFError)
		}
	}
	return nil
}

// ResolveImage checks a pull policy (Always, IfNotPresent, Never; an
// ErrInvalid otherwise) and names the image a run uses: ref when given,
// else the name `cnibench image build` gives the running binary.
func ResolveImage(ref, pullPolicy, version string) (string, corev1.PullPolicy, error) {
	pp := corev1.PullPolicy(pullPolicy)
	switch pp {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return "", "", errkind.Errorf(ErrInvalid, "--image-pull-policy %q: use Always, IfNotPresent or Never", pullPolicy)
	}
	if ref != "" {
		return ref, pp, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", "", fmt.Errorf("find this binary to name its image: %w; pass --image", err)
	}
	ref, err = image.DefaultRef(exe, version)
	return ref, pp, err
}
