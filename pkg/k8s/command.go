package k8s

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/cnibench/cnibench/pkg/image"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
)

// ErrInvalid is matched (errors.Is) by the errors the user fixes by
// changing the command line: a flag's value, a node choice the cluster
// cannot honour (PlanScenarios, PickNode), a --services count it cannot
// take (CheckServices). The CLI exits 2 for them.
var ErrInvalid = errors.New("invalid k8s flags")

// Help is `cnibench k8s --help`'s description.
const Help = `Runs cnibench server/client pods in a cluster: on one node, across nodes, on the
host network and through a ClusterIP Service; audits every node's tuning; and
removes everything it created. The cluster is chosen as kubectl chooses it:
--kubeconfig, else KUBECONFIG, else ~/.kube/config; --context overrides the
current context. The pods need the image from 'cnibench image build' on every
node (or in a registry the nodes can pull from: pass --image).`

// ClusterFlags choose the cluster (as kubectl does) and, for the commands
// that start pods, the namespace and image.
type ClusterFlags struct {
	Kubeconfig, Context          string
	Namespace, Image, PullPolicy string
}

// AddFlags defines the flags on fs: the cluster, and withImage (the
// commands that start pods) the namespace and image too.
func (f *ClusterFlags) AddFlags(fs *pflag.FlagSet, withImage bool) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&f.Context, "context", "", "kubeconfig context (default: the current context)")
	if !withImage {
		return
	}
	fs.StringVarP(&f.Namespace, "namespace", "n", DefaultNamespace, "namespace for the run's objects (created and deleted when missing)")
	fs.StringVar(&f.Image, "image", "", "cnibench image (default: "+image.DefaultRepository+":<version>-<sha> of this binary, as `cnibench image build` names it)")
	fs.StringVar(&f.PullPolicy, "image-pull-policy", string(corev1.PullIfNotPresent), "Always, IfNotPresent or Never (Never for clusters without a registry, e.g. k8slab)")
}

// Connect reaches the cluster the flags name.
func (f ClusterFlags) Connect() (*Conn, error) { return Connect(f.Kubeconfig, f.Context) }

// ConnectFor is the start `k8s latency` and `k8s disrupt` share: reach
// the cluster, check that services filler Services fit in namespace ns
// beside what the cluster holds, and read it (with the context and server
// it was reached by).
func (f ClusterFlags) ConnectFor(ctx context.Context, ns string, services int) (*Conn, *Cluster, []corev1.Node, error) {
	conn, err := f.Connect()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := CheckServices(ctx, conn.Client, ns, services); err != nil {
		return nil, nil, nil, err
	}
	cl, nodes, err := Fingerprint(ctx, conn.Client)
	if err != nil {
		return nil, nil, nil, err
	}
	cl.Context, cl.Server = conn.Context, conn.Server
	return conn, cl, nodes, nil
}

// ResolveImage is ResolveImage of the flags: --image, or the name `image
// build` gives this binary of version.
func (f ClusterFlags) ResolveImage(version string) (string, corev1.PullPolicy, error) {
	return ResolveImage(f.Image, f.PullPolicy, version)
}

// InfoHelp is `cnibench k8s info --help`'s description.
const InfoHelp = `Reads the cluster's version, nodes and CNI from the API. The API alone names a
CNI only by its kube-system workloads and node annotations, which outlive the agent
that wrote them; --probe asks every Ready node instead, with the probe pod a run
starts (host network, hostPID, as nobody, no capabilities; it needs the image, as a
run does): the agents running and their flags, the devices, kube-proxy's own answer.
--inspect-datapath runs that probe as root with CAP_SYS_PTRACE, CAP_SYS_ADMIN and
CAP_NET_ADMIN: it also asks the CNI agent (Cilium's version and host routing) and
lists the BPF programs attached on each node.`

// InfoCommand is `cnibench k8s info`: the cluster fingerprint a run
// records, from the API alone or, with Probe, completed by a probe pod on
// every Ready node as a run completes it.
type InfoCommand struct {
	Cluster ClusterFlags
	// Probe runs the node probes; InspectDatapath runs them privileged
	// (and implies Probe).
	Probe, InspectDatapath bool
	Timeout                time.Duration
	Version                string
}

// markUnprobed says how little the API alone knows about the CNI:
// annotations outlive the agent that wrote them, and an agent run outside
// pods (k8slab's Cilium) names nothing.
func (c *Cluster) markUnprobed() {
	switch {
	case c.CNI == cniUnknown:
		c.CNI = "unknown (no kube-system workload or node annotation names one; --probe asks the nodes)"
	case c.cniSource == "":
		c.CNI += " (from node annotations only, which outlive the agent; --probe asks the nodes)"
	}
}

// Run reads the fingerprint; progress goes to log.
func (c InfoCommand) Run(ctx context.Context, log io.Writer) (*Cluster, error) {
	probe := c.Probe || c.InspectDatapath
	var img string
	var pp corev1.PullPolicy
	if probe {
		var err error
		if img, pp, err = c.Cluster.ResolveImage(c.Version); err != nil {
			return nil, err
		}
	}
	conn, err := c.Cluster.Connect()
	if err != nil {
		return nil, err
	}
	cl, nodes, err := Fingerprint(ctx, conn.Client)
	if err != nil {
		return nil, err
	}
	cl.Context, cl.Server = conn.Context, conn.Server
	if !probe {
		cl.markUnprobed()
		return cl, nil
	}
	r := &Runner{Client: conn.Client, RunID: runid.New()}
	o := Options{Namespace: c.Cluster.Namespace, Image: img, PullPolicy: pp, ReadyTimeout: c.Timeout,
		InspectDatapath: c.InspectDatapath, Log: log}
	err = r.ProbeCluster(ctx, cl, nodes, o)
	return cl, err
}

// CleanHelp is `cnibench k8s clean --help`'s description.
const CleanHelp = `Deletes, in every namespace, the pods, services and daemonsets labelled
app.kubernetes.io/managed-by=cnibench, and every namespace with that label, then
waits until the namespaces are gone. Safe to run at any time; objects of a run
still going are deleted too.`

// CleanCluster is `cnibench k8s clean`: Clean on the flags' cluster,
// printing each object removed (also when a later one fails).
func (f ClusterFlags) CleanCluster(ctx context.Context, wait time.Duration, w io.Writer) error {
	conn, err := f.Connect()
	if err != nil {
		return err
	}
	removed, err := Clean(ctx, conn.Bulk, wait, time.Second)
	for _, r := range removed {
		fmt.Fprintln(w, "deleted", r)
	}
	if err == nil && len(removed) == 0 {
		fmt.Fprintln(w, "nothing to clean")
	}
	return err
}

// AuditHelp is `cnibench k8s audit --help`'s description.
const AuditHelp = `Creates a DaemonSet whose pods run 'cnibench tune audit --json --root /host' once
on every node (control-plane nodes included), with the node's /proc and /sys
mounted read-only under /host, the host network (net.* sysctls are per network
namespace) and no capabilities. It prints one table: a row per knob, a column
per node; then deletes the DaemonSet.`

// AuditCommand is `cnibench k8s audit` as given.
type AuditCommand struct {
	Cluster ClusterFlags
	Profile string // the tuning profile to judge against; "" = tune's default
	Timeout time.Duration
	Keep    bool
	Version string
}

// Run audits every node of the cluster; progress goes to log.
func (a AuditCommand) Run(ctx context.Context, log io.Writer) ([]NodeAudit, error) {
	img, pp, err := a.Cluster.ResolveImage(a.Version)
	if err != nil {
		return nil, err
	}
	conn, err := a.Cluster.Connect()
	if err != nil {
		return nil, err
	}
	var args []string
	if a.Profile != "" {
		args = append(args, "--profile", a.Profile)
	}
	r := &Runner{Client: conn.Client, RunID: runid.New()}
	return r.Audit(ctx, AuditOptions{Namespace: a.Cluster.Namespace, Image: img, PullPolicy: pp, Args: args,
		Timeout: a.Timeout, Keep: a.Keep, Log: log})
}

// RunHelp is `cnibench k8s run --help`'s description.
const RunHelp = `Starts one cnibench server pod per scenario and then, one at a time and
interleaved over the repeats, a client pod that measures against it:

  pod-same-node   server and client pods pinned to one node
  pod-cross-node  on two different nodes (skipped on a one-node cluster)
  host-network    hostNetwork pods on two nodes: the node-to-node baseline
  service         client -> ClusterIP Service -> server pod (across nodes when possible)

and, with --scenarios all or by name, the paths other tools measure:

  pod-to-host     pod -> hostNetwork pod on another node (cilium perf)
  host-to-pod     hostNetwork pod -> pod on another node (cilium perf)
  hairpin         a pod -> a ClusterIP Service whose only endpoint is that pod
                  (kubernetes/perf-tests; the server is a sidecar of the client)

Nodes are picked automatically (the first usable nodes by name) unless
--client-node / --server-node say otherwise. The engine pods have no
capabilities and run as nobody. Everything is deleted at the end, also on
failure and Ctrl-C.`

// RunCommand is `cnibench k8s run` as given: the measurement flags, the
// cluster, the node choice and where the run is stored.
type RunCommand struct {
	RunFlags
	Cluster                        ClusterFlags
	ClientNode, ServerNode         string
	NodeSelector                   string
	ClientSelector, ServerSelector string
	TolerateTaints                 bool
	ReadyTimeout                   time.Duration
	Keep                           bool
	DBPath                         string
	JSON                           bool // print the plan and samples as JSON instead of the report table
	Version                        string
	// Experiment is what the store keeps as the run's experiment: the
	// flags as given, so the run can be repeated.
	Experiment string
}

// Run checks every flag (an ErrInvalid, before the cluster is contacted),
// plans the run against the cluster, measures it while storing each sample
// in the results database, and prints the stored run's report (or JSON)
// to out. Progress goes to log. A run stored with failed steps prints what
// it has and returns the failure.
func (c RunCommand) Run(ctx context.Context, out, log io.Writer) error {
	o, sizes, err := c.Options()
	if err != nil {
		return err
	}
	img, pp, err := c.Cluster.ResolveImage(c.Version)
	if err != nil {
		return err
	}
	if c.Cluster.Image == "" && NeedsTools(o.Engines) {
		img = DefaultToolsImage(img) // as `image build --with-tools` names it
	}
	conn, err := c.Cluster.Connect()
	if err != nil {
		return err
	}
	o.Namespace, o.Image, o.PullPolicy = c.Cluster.Namespace, img, pp
	o.ClientNode, o.ServerNode, o.ReadyTimeout, o.Keep, o.Log = c.ClientNode, c.ServerNode, c.ReadyTimeout, c.Keep, log
	o.NodeSelector, o.TolerateTaints = c.NodeSelector, c.TolerateTaints
	o.ClientSelector, o.ServerSelector = c.ClientSelector, c.ServerSelector
	r := &Runner{Client: conn.Client, Bulk: conn.Bulk}
	plan, err := r.Prepare(ctx, o)
	if err != nil {
		return err
	}
	plan.Cluster.Context, plan.Cluster.Server = conn.Context, conn.Server
	db, err := store.Open(c.DBPath)
	if err != nil {
		return err
	}
	defer db.Close()
	rec, runErr := r.Record(ctx, plan, o, sizes, store.Recorder{DB: db}, c.Version, c.Experiment)
	if rec.RunID == 0 {
		return runErr
	}
	fmt.Fprintf(log, "stored %d sample(s) as run %d (%s) in %s; show it with: cnibench report %s\n",
		rec.Stored, rec.RunID, rec.Name, db.Path(), rec.Name)
	if c.JSON {
		if err := WriteRunJSON(out, plan, rec.Samples); err != nil {
			return err
		}
	} else if rec.Stored > 0 {
		if err := report.RenderStored(out, report.FormatTable, db, fmt.Sprint(rec.RunID)); err != nil {
			return errors.Join(runErr, err)
		}
		WriteSkipped(out, plan)
	}
	return runErr
}
