package k8s

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
)

// StoreRun describes a planned run for the results store: kind "k8s", one
// arm per scenario that runs, host-network as the baseline when it runs
// (the "× host" column of the source documents' tables), the cluster's
// fingerprint as the host, and the details as labels. experiment is the
// text stored as the run's experiment (the command line, for k8s runs).
func StoreRun(plan *Plan, o Options, version, experiment string) *store.Run {
	r := &store.Run{
		Name:       runid.Name(plan.RunID, store.KindK8s),
		Kind:       store.KindK8s,
		Experiment: experiment,
		Host:       clusterFingerprint(plan.Cluster, version),
		Labels:     clusterLabels(plan.Cluster),
	}
	r.Labels["k8s.namespace"], r.Labels["k8s.image"] = plan.Namespace, o.Image
	r.Labels["k8s.repeats"] = strconv.Itoa(o.Repeats)
	if o.Services > 0 {
		r.Labels["k8s.services"] = strconv.Itoa(o.Services)
	}
	engines := plan.engines(o)
	var names []string
	for _, e := range engines {
		names = append(names, e.Name)
	}
	r.Labels["k8s.engines"] = strings.Join(names, ",")
	for k, why := range plan.EngineSkips {
		r.Labels["skipped."+k] = why
	}
	runnable := 0
	for _, p := range plan.Placements {
		if p.Skip != "" {
			r.Labels["skipped."+p.Scenario] = p.Skip
			continue
		}
		runnable++
		desc := p.Description()
		if p.ViaService && o.Services > 0 {
			desc += fmt.Sprintf("; behind %d other Services", o.Services)
		}
		for idx, e := range engines {
			if _, skipped := plan.EngineSkips[p.Scenario+"/"+e.Name]; skipped {
				continue
			}
			d := desc
			if len(engines) > 1 {
				d += "; engine " + e.Name
			}
			r.Arms = append(r.Arms, store.Arm{Name: ArmName(p.Scenario, engines, idx), Description: d,
				Topology: "k8s/" + p.Scenario, Engine: e.Name})
		}
		r.Labels["nodes."+p.Scenario] = p.ClientNode + " -> " + p.ServerNode
		if p.Scenario == ScenarioHost {
			r.Baseline = ScenarioHost
		}
	}
	// A cross-check of one scenario compares the engines: every arm as a
	// ratio to the first engine's, as the lab's crosscheck shows them.
	if len(engines) > 1 && runnable == 1 && len(r.Arms) > 0 {
		r.Baseline = r.Arms[0].Name
	}
	return r
}

// clusterLabels are the labels every stored Kubernetes run has about its
// cluster: version, CNI, nodes, the probed datapath and kube-proxy mode,
// the BPF programs attached on each node (--inspect-datapath) or why they
// were not listed.
func clusterLabels(c *Cluster) map[string]string {
	l := map[string]string{"k8s.version": c.Version, "k8s.cni": c.CNI, "k8s.nodes": strconv.Itoa(len(c.Nodes))}
	for k, v := range map[string]string{"k8s.context": c.Context, "k8s.cni_mode": c.CNIMode, "k8s.kube_proxy_mode": c.KubeProxyMode,
		"k8s.cni_version": c.CNIVersion, "k8s.datapath": c.Datapath, "k8s.server": c.Server} {
		if v != "" {
			l[k] = v
		}
	}
	for _, p := range c.Probes {
		switch {
		case len(p.BPF) > 0:
			l["bpf."+p.Node] = strings.Join(p.BPF, "; ")
		case p.BPFError != "" && p.Error == "":
			l["bpf."+p.Node] = p.BPFError
		}
	}
	return l
}

// clusterFingerprint folds the nodes into the one fingerprint a run has:
// identical values stay as they are, differing ones are listed per node.
func clusterFingerprint(c *Cluster, version string) result.Fingerprint {
	fp := result.Fingerprint{Hostname: "k8s", Cnibench: version, Notes: map[string]string{
		"kubernetes": c.Version, "cni": c.CNI, "nodes": strconv.Itoa(len(c.Nodes)),
	}}
	if c.CNIMode != "" {
		fp.Notes["cni_mode"] = c.CNIMode
	}
	if c.KubeProxyMode != "" {
		fp.Notes["kube_proxy_mode"] = c.KubeProxyMode
	}
	if c.CNIVersion != "" {
		fp.Notes["cni_version"] = c.CNIVersion
	}
	if c.Datapath != "" {
		fp.Notes["datapath"] = c.Datapath
	}
	if c.Context != "" {
		fp.Hostname = "k8s:" + c.Context
	}
	// Reports show runs side by side by host: name the datapath there, so
	// a comparison of CNIs or proxy modes on one cluster reads as one.
	dp := c.CNI
	if c.CNIVersion != "" && !strings.Contains(c.CNIVersion, "=") {
		dp += " " + c.CNIVersion
	}
	if c.CNIMode != "" {
		dp += " " + c.CNIMode
	}
	if c.KubeProxyMode != "" {
		dp += ", kube-proxy " + c.KubeProxyMode
	}
	fp.Hostname += " [" + dp + "]"
	join := func(get func(NodeInfo) string) string {
		seen := map[string]bool{}
		var vals []string
		for _, n := range c.Nodes {
			if v := get(n); !seen[v] {
				seen[v] = true
				vals = append(vals, v)
			}
		}
		if len(vals) <= 1 {
			return strings.Join(vals, "")
		}
		var per []string
		for _, n := range c.Nodes {
			per = append(per, n.Name+"="+get(n))
		}
		return strings.Join(per, ", ")
	}
	fp.Kernel = join(func(n NodeInfo) string { return n.Kernel })
	fp.Distro = join(func(n NodeInfo) string { return n.OSImage })
	if cpus := join(func(n NodeInfo) string { return strconv.Itoa(n.CPUs) }); cpus != "" {
		if v, err := strconv.Atoi(cpus); err == nil {
			fp.Cores = v
		} else {
			fp.Notes["cpus"] = cpus
		}
	}
	for _, n := range c.Nodes {
		fp.Notes["node."+n.Name] = fmt.Sprintf("%s %s %s %s", n.InternalIP, n.Kernel, n.Runtime, n.Kubelet)
	}
	return fp
}

// StoreSamples turns one client pod's outcome into store samples: one per
// result, or — when the pod failed — one failed sample per planned test and
// size, so the report shows the hole instead of silently fewer repeats.
// seq is the run's running sample counter.
func StoreSamples(runID int64, s Sample, tests []string, sizes []int, engine string, seq *int) []*store.Sample {
	if engine == "" {
		engine = "builtin"
	}
	var out []*store.Sample
	add := func(test string, size int, r *result.Result, errText string) {
		*seq++
		out = append(out, &store.Sample{RunID: runID, Seq: *seq, Arm: s.armName(), Engine: engine,
			Test: test, MsgSize: size, Repeat: s.Repeat, Result: r, Error: errText})
	}
	if s.Error != "" {
		for _, t := range tests {
			for _, z := range sizes {
				add(t, z, nil, s.Error)
			}
		}
		return out
	}
	for _, r := range s.Results {
		add(r.Test, r.MsgSizeBytes, r, "")
	}
	return out
}
