package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/cnibench/cnibench/pkg/image"
	"github.com/cnibench/cnibench/pkg/k8s"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
)

func newK8sCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "k8s",
		Short: "Run the benchmarks as pods in a Kubernetes cluster",
		Long: `Runs cnibench server/client pods in a cluster: on one node, across nodes, on the
host network and through a ClusterIP Service; audits every node's tuning; and
removes everything it created. The cluster is chosen as kubectl chooses it:
--kubeconfig, else KUBECONFIG, else ~/.kube/config; --context overrides the
current context. The pods need the image from 'cnibench image build' on every
node (or in a registry the nodes can pull from: pass --image).`,
	}
	cmd.AddCommand(newK8sRunCmd(), newK8sAuditCmd(), newK8sCleanCmd(), newK8sInfoCmd(), newK8sPauseCmd(),
		newK8sNodeInfoCmd(), newK8sWaitTCPCmd(), newK8sToolServerCmd(), newK8sAgentCPUCmd())
	return cmd
}

// k8sConnFlags are the flags every k8s subcommand shares.
type k8sConnFlags struct {
	kubeconfig, context, namespace, image, pullPolicy string
}

func (f *k8sConnFlags) add(cmd *cobra.Command, withImage bool) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context (default: the current context)")
	if !withImage {
		return
	}
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", k8s.DefaultNamespace, "namespace for the run's objects (created and deleted when missing)")
	cmd.Flags().StringVar(&f.image, "image", "", "cnibench image (default: "+image.DefaultRepository+":<version>-<sha> of this binary, as `cnibench image build` names it)")
	cmd.Flags().StringVar(&f.pullPolicy, "image-pull-policy", string(corev1.PullIfNotPresent), "Always, IfNotPresent or Never (Never for clusters without a registry, e.g. k8slab)")
}

func (f *k8sConnFlags) resolveImage() (string, corev1.PullPolicy, error) {
	ref, pp, err := k8s.ResolveImage(f.image, f.pullPolicy, Version)
	if k8s.IsFlagError(err) {
		return "", "", UsageError{err}
	}
	return ref, pp, err
}

func (f *k8sConnFlags) connect() (*k8s.Conn, error) {
	return k8s.Connect(f.kubeconfig, f.context)
}

func newK8sRunCmd() *cobra.Command {
	var (
		cf                     k8sConnFlags
		rf                     k8s.RunFlags
		clientNode, serverNode string
		nodeSelector           string
		clientSel, serverSel   string
		tolerateTaints         bool
		readyTimeout           time.Duration
		dbPath                 string
		asJSON, keep           bool
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Measure pod-to-pod (same node, cross node), host network and Service paths",
		Long: `Starts one cnibench server pod per scenario and then, one at a time and
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
failure and Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, sizes, err := rf.Options()
			if err != nil {
				return UsageError{err}
			}
			img, pp, err := cf.resolveImage()
			if err != nil {
				return err
			}
			if cf.image == "" && k8s.NeedsTools(o.Engines) {
				img = k8s.DefaultToolsImage(img) // as `image build --with-tools` names it
			}
			conn, err := cf.connect()
			if err != nil {
				return err
			}
			o.Namespace, o.Image, o.PullPolicy = cf.namespace, img, pp
			o.ClientNode, o.ServerNode, o.ReadyTimeout, o.Keep, o.Log = clientNode, serverNode, readyTimeout, keep, cmd.ErrOrStderr()
			o.NodeSelector, o.TolerateTaints = nodeSelector, tolerateTaints
			o.ClientSelector, o.ServerSelector = clientSel, serverSel
			r := &k8s.Runner{Client: conn.Client, Bulk: conn.Bulk}
			plan, err := r.Prepare(cmd.Context(), o)
			if k8s.IsFlagError(err) {
				return UsageError{err}
			} else if err != nil {
				return err
			}
			plan.Cluster.Context, plan.Cluster.Server = conn.Context, conn.Server
			db, err := store.Open(dbPath)
			if err != nil {
				return err
			}
			defer db.Close()
			rec, runErr := r.Record(cmd.Context(), plan, o, sizes, store.Recorder{DB: db}, Version, k8sExperimentText(cmd))
			if rec.RunID == 0 {
				return runErr
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "stored %d sample(s) as run %d (%s) in %s; show it with: cnibench report %s\n",
				rec.Stored, rec.RunID, rec.Name, db.Path(), rec.Name)
			if asJSON {
				if err := k8s.WriteRunJSON(cmd.OutOrStdout(), plan, rec.Samples); err != nil {
					return err
				}
			} else if rec.Stored > 0 {
				if err := report.RenderStored(cmd.OutOrStdout(), report.FormatTable, db, fmt.Sprint(rec.RunID)); err != nil {
					return errors.Join(runErr, err)
				}
				k8s.WriteSkipped(cmd.OutOrStdout(), plan)
			}
			return runErr
		},
	}
	cf.add(cmd, true)
	f := cmd.Flags()
	f.StringVar(&rf.Scenarios, "scenarios", "default", "comma list of scenarios ("+strings.Join(k8s.AllScenarios, ", ")+"); default = "+strings.Join(k8s.Scenarios, ",")+"; or all")
	f.StringVar(&clientNode, "client-node", "", "node for client pods (default: first usable node)")
	f.StringVar(&serverNode, "server-node", "", "node for server pods of two-node scenarios (default: next usable node)")
	f.StringVar(&nodeSelector, "node-selector", "", "use only nodes matching this label selector, e.g. pool=perf")
	f.StringVar(&clientSel, "client-node-selector", "", "pick the client's node by label selector (the first usable match by name), e.g. zone=a")
	f.StringVar(&serverSel, "server-node-selector", "", "pick the server's node by label selector (a match other than the client's node when there is one)")
	f.BoolVar(&tolerateTaints, "tolerate-taints", false, "let the engine pods onto tainted nodes (a toleration for every taint)")
	f.StringVar(&rf.Tests, "test", "tcp_lat,udp_lat,tcp_bw,udp_bw", "tests: "+strings.Join(result.Tests, ","))
	f.StringVar(&rf.MsgSizes, "msg-size", "64,1K,4K", "message sizes in bytes (K = 1024); udp_bw needs at least 8")
	f.DurationVar(&rf.Duration, "duration", 5*time.Second, "measured time per test and size")
	f.DurationVar(&rf.Warmup, "warmup", time.Second, "unmeasured warmup before each measurement")
	f.IntVar(&rf.Parallel, "parallel", 1, "parallel streams/connections")
	f.StringVar(&rf.Engine, "engine", "builtin", "builtin, qperf, iperf3 or sockperf (the tools need `cnibench image build --with-tools`); a comma list measures each scenario with each, interleaved: a cross-check")
	f.BoolVar(&rf.Profile, "profile", false, "sample every CPU of the client's node in each measured window (the client pod then runs as root with CAP_PERFMON and CAP_SYSLOG only); see docs/profiling.md")
	f.BoolVar(&rf.AgentCPU, "agent-cpu", false, "meter the CPU of the datapath agents (flanneld, kube-proxy, ovs-vswitchd, …) on the client's and server's nodes in each measured window (a hostPID, hostNetwork pod per node, as nobody without capabilities)")
	f.StringVar(&dbPath, "db", store.DefaultPath(), "results database (also $CNIBENCH_DB)")
	f.IntVar(&rf.Repeats, "repeats", 1, "repeats of every scenario, interleaved")
	f.IntVar(&rf.Services, "services", 0, fmt.Sprintf("put the measured Service behind this many other Services (0-%d; with EndpointSlices to %s, deleted afterwards)", k8s.MaxServices, k8s.PlaceholderAddress))
	f.DurationVar(&readyTimeout, "ready-timeout", 2*time.Minute, "how long a pod may take to become ready")
	f.BoolVar(&asJSON, "json", false, "print the plan, cluster fingerprint and every result as JSON")
	f.BoolVar(&keep, "keep", false, "leave the run's pods and namespace for debugging (remove with `cnibench k8s clean`)")
	return cmd
}

// k8sExperimentText is what the store keeps as a k8s run's "experiment":
// the flags as given, one per line, so the run can be repeated.
func k8sExperimentText(cmd *cobra.Command) string {
	var b strings.Builder
	b.WriteString("# cnibench k8s run\n")
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Name == "kubeconfig" {
			return
		}
		fmt.Fprintf(&b, "%s: %q\n", f.Name, f.Value.String())
	})
	return b.String()
}

func newK8sAuditCmd() *cobra.Command {
	var (
		cf      k8sConnFlags
		profile string
		timeout time.Duration
		asJSON  bool
		keep    bool
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Run `cnibench tune audit` on every node (a DaemonSet) and print node × knob",
		Long: `Creates a DaemonSet whose pods run 'cnibench tune audit --json --root /host' once
on every node (control-plane nodes included), with the node's /proc and /sys
mounted read-only under /host, the host network (net.* sysctls are per network
namespace) and no capabilities. It prints one table: a row per knob, a column
per node; then deletes the DaemonSet.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			img, pp, err := cf.resolveImage()
			if err != nil {
				return err
			}
			conn, err := cf.connect()
			if err != nil {
				return err
			}
			var args []string
			if profile != "" {
				args = append(args, "--profile", profile)
			}
			r := &k8s.Runner{Client: conn.Client, RunID: runid.New()}
			audits, err := r.Audit(cmd.Context(), k8s.AuditOptions{
				Namespace: cf.namespace, Image: img, PullPolicy: pp, Args: args,
				Timeout: timeout, Keep: keep, Log: cmd.ErrOrStderr(),
			})
			if err != nil {
				return err
			}
			if asJSON {
				return report.WriteJSON(cmd.OutOrStdout(), audits)
			}
			return k8s.WriteAuditTable(cmd.OutOrStdout(), audits)
		},
	}
	cf.add(cmd, true)
	cmd.Flags().StringVar(&profile, "profile", "latency", "tuning profile to judge against: latency or throughput")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long the nodes may take")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print every node's findings as JSON")
	cmd.Flags().BoolVar(&keep, "keep", false, "leave the DaemonSet for debugging")
	return cmd
}

func newK8sCleanCmd() *cobra.Command {
	var (
		cf      k8sConnFlags
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Delete every cnibench-labelled object and namespace in the cluster",
		Long: `Deletes, in every namespace, the pods, services and daemonsets labelled
app.kubernetes.io/managed-by=cnibench, and every namespace with that label, then
waits until the namespaces are gone. Safe to run at any time; objects of a run
still going are deleted too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := cf.connect()
			if err != nil {
				return err
			}
			removed, err := k8s.Clean(cmd.Context(), conn.Bulk, timeout, time.Second)
			for _, r := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), "deleted", r)
			}
			if err != nil {
				return err
			}
			if len(removed) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing to clean")
			}
			return nil
		},
	}
	cf.add(cmd, false)
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for namespaces to terminate (0: do not wait)")
	return cmd
}

func newK8sInfoCmd() *cobra.Command {
	var (
		cf     k8sConnFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Print the cluster fingerprint a run records: version, CNI, nodes, kernels",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := cf.connect()
			if err != nil {
				return err
			}
			c, _, err := k8s.Fingerprint(cmd.Context(), conn.Client)
			if err != nil {
				return err
			}
			c.Context, c.Server = conn.Context, conn.Server
			if asJSON {
				return report.WriteJSON(cmd.OutOrStdout(), c)
			}
			return c.WriteNodes(cmd.OutOrStdout())
		},
	}
	cf.add(cmd, false)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

// newK8sPauseCmd is the main container of the audit DaemonSet's pods: it
// waits until the pod is deleted (SIGTERM cancels the context), so the pod
// stays Running after its init container printed the audit.
func newK8sPauseCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "pause",
		Short:  "Wait until terminated (the audit DaemonSet's main container)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			<-cmd.Context().Done()
			return nil
		},
	}
}

// newK8sNodeInfoCmd is what a run's node probe pods run: kube-proxy's mode,
// the node's links and datapath agents, as one JSON line.
func newK8sNodeInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "node-info",
		Short:  "Print this node's kube-proxy mode, links and datapath agents as JSON (the run's probe pods)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return json.NewEncoder(cmd.OutOrStdout()).Encode(k8s.ProbeNode(cmd.Context(), k8s.KubeProxyMetricsAddr, "/proc"))
		},
	}
}

// newK8sAgentCPUCmd is what a run's agent meter pods run (--agent-cpu):
// one JSON line of the node's datapath agents' CPU ticks per interval.
func newK8sAgentCPUCmd() *cobra.Command {
	var interval time.Duration
	cmd := &cobra.Command{
		Use:    "agent-cpu",
		Short:  "Print this node's datapath agents' CPU ticks as a JSON line per interval (the run's agent meter pods)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval < 10*time.Millisecond {
				return UsageError{fmt.Errorf("--interval %s: must be at least 10ms", interval)}
			}
			return k8s.RunAgentMeter(cmd.Context(), cmd.OutOrStdout(), "/proc", interval)
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", k8s.AgentInterval, "time between samples")
	return cmd
}

// newK8sWaitTCPCmd is what the service scenario's probe pod runs: it
// returns once the address accepts a TCP connection.
func newK8sWaitTCPCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:    "wait-tcp HOST:PORT",
		Short:  "Wait until HOST:PORT accepts a TCP connection (the service scenario's probe pod)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := k8s.WaitTCP(cmd.Context(), args[0], timeout)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s accepted after %.2fs\n", args[0], d.Seconds())
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long")
	return cmd
}
