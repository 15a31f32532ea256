package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/k8s"
	"github.com/cnibench/cnibench/pkg/store"
)

func newK8sCmd() *cobra.Command {
	return group("k8s", "Run the benchmarks as pods in a Kubernetes cluster", k8s.Help,
		newK8sRunCmd(), newK8sAuditCmd(), newK8sCleanCmd(), newK8sInfoCmd(), newK8sPauseCmd(),
		newK8sNodeInfoCmd(), newK8sWaitTCPCmd(), newK8sWaitIdleCmd(), newK8sToolServerCmd(), newK8sAgentCPUCmd(),
		newK8sLatencyCmd(), newK8sLatencyAgentCmd(), newK8sDisruptCmd(), newK8sDisruptAgentCmd())
}

func newK8sRunCmd() *cobra.Command {
	c := k8s.RunCommand{Version: Version}
	cmd := command("run", "Measure pod-to-pod (same node, cross node), host network and Service paths", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			c.Experiment = k8sExperimentText(cmd)
			return c.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = k8s.RunHelp
	c.Cluster.AddFlags(cmd.Flags(), true)
	f := cmd.Flags()
	f.StringVar(&c.Scenarios, "scenarios", "default", "comma list of scenarios ("+strings.Join(k8s.AllScenarios, ", ")+"); default = "+strings.Join(k8s.Scenarios, ",")+"; or all")
	f.StringVar(&c.ClientNode, "client-node", "", "node for client pods (default: first usable node)")
	f.StringVar(&c.ServerNode, "server-node", "", "node for server pods of two-node scenarios (default: next usable node)")
	f.StringVar(&c.NodeSelector, "node-selector", "", "use only nodes matching this label selector, e.g. pool=perf")
	f.StringVar(&c.ClientSelector, "client-node-selector", "", "pick the client's node by label selector (the first usable match by name), e.g. zone=a")
	f.StringVar(&c.ServerSelector, "server-node-selector", "", "pick the server's node by label selector (a match other than the client's node when there is one)")
	f.BoolVar(&c.TolerateTaints, "tolerate-taints", false, "let the engine pods onto tainted nodes (a toleration for every taint)")
	measureFlags{&c.Tests, &c.MsgSizes, &c.Duration, &c.Warmup, &c.Parallel}.add(f, "tcp_lat,udp_lat,tcp_bw,udp_bw", "64,1K,4K", 5*time.Second)
	f.StringVar(&c.Engine, "engine", "builtin", "builtin, qperf, iperf3 or sockperf (the tools need `cnibench image build --with-tools`); a comma list measures each scenario with each, interleaved: a cross-check")
	f.BoolVar(&c.Profile, "profile", false, "sample every CPU of the client's node in each measured window (the client pod then runs as root with CAP_PERFMON and CAP_SYSLOG only); see docs/profiling.md")
	f.BoolVar(&c.InspectDatapath, "inspect-datapath", false, "run the node probes as root with CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_NET_ADMIN, to ask the CNI agent itself (Cilium's version and host routing, over its API socket) and list the BPF programs attached on each node's devices and cgroup (stored as labels bpf.<node>)")
	f.BoolVar(&c.AgentCPU, "agent-cpu", false, "meter the CPU of the datapath agents (flanneld, kube-proxy, ovs-vswitchd, …) on the client's and server's nodes in each measured window (a hostPID, hostNetwork pod per node, as nobody without capabilities)")
	f.BoolVar(&c.PathMTU, "path-mtu", true, "each built-in client pod first probes its path (MTU with don't-fragment probes, black holes, TCP's MSS), stored with its results")
	f.StringVar(&c.DBPath, "db", store.DefaultPath(), "results database (also $CNIBENCH_DB)")
	f.IntVar(&c.Repeats, "repeats", 1, "repeats of every scenario, interleaved")
	f.Float64Var(&c.SettleIdle, "settle-idle", 0, "before measuring, wait until each client node's CPUs are at least this many percent idle over 3s (at most 5m; then a warning): measure the steady state, not kube-proxy and the API server digesting --services")
	f.IntVar(&c.Services, "services", 0, fmt.Sprintf("put the measured Service behind this many other Services (0-%d; with EndpointSlices to %s, deleted afterwards)", k8s.MaxServices, k8s.PlaceholderAddress))
	f.DurationVar(&c.ReadyTimeout, "ready-timeout", 2*time.Minute, "how long a pod may take to become ready")
	f.BoolVar(&c.JSON, "json", false, "print the plan, cluster fingerprint and every result as JSON")
	f.BoolVar(&c.Keep, "keep", false, "leave the run's pods and namespace for debugging (remove with `cnibench k8s clean`)")
	return cmd
}

// k8sExperimentText is what the store keeps as a k8s run's "experiment".
func k8sExperimentText(cmd *cobra.Command) string {
	return k8s.ExperimentText(cmd.CommandPath(), cmd.Flags())
}

func newK8sAuditCmd() *cobra.Command {
	a := k8s.AuditCommand{Version: Version}
	cmd := showCmd("audit", "Run `cnibench tune audit` on every node (a DaemonSet) and print node × knob", "print every node's findings as JSON", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) ([]k8s.NodeAudit, error) {
			return a.Run(cmd.Context(), cmd.ErrOrStderr())
		},
		func(audits []k8s.NodeAudit, w io.Writer) error { return k8s.WriteAuditTable(w, audits) })
	cmd.Long = k8s.AuditHelp
	a.Cluster.AddFlags(cmd.Flags(), true)
	cmd.Flags().StringVar(&a.Profile, "profile", "latency", "tuning profile to judge against: latency or throughput")
	cmd.Flags().DurationVar(&a.Timeout, "timeout", 2*time.Minute, "how long the nodes may take")
	cmd.Flags().BoolVar(&a.Keep, "keep", false, "leave the DaemonSet for debugging")
	return cmd
}

func newK8sCleanCmd() *cobra.Command {
	var cf k8s.ClusterFlags
	var timeout time.Duration
	cmd := command("clean", "Delete every cnibench-labelled object and namespace in the cluster", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return cf.CleanCluster(cmd.Context(), timeout, cmd.OutOrStdout())
		})
	cmd.Long = k8s.CleanHelp
	cf.AddFlags(cmd.Flags(), false)
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for namespaces to terminate (0: do not wait)")
	return cmd
}

func newK8sInfoCmd() *cobra.Command {
	c := k8s.InfoCommand{Version: Version}
	cmd := showCmd("info", "Print the cluster fingerprint a run records: version, CNI, nodes, kernels", "print as JSON", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (*k8s.Cluster, error) {
			return c.Run(cmd.Context(), cmd.ErrOrStderr())
		}, (*k8s.Cluster).WriteNodes)
	cmd.Long = k8s.InfoHelp
	c.Cluster.AddFlags(cmd.Flags(), true)
	cmd.Flags().BoolVar(&c.Probe, "probe", false, "ask every Ready node with a probe pod (deleted afterwards)")
	cmd.Flags().BoolVar(&c.InspectDatapath, "inspect-datapath", false, "probe as root with CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_NET_ADMIN: the CNI agent's own answers and the attached BPF programs (implies --probe)")
	cmd.Flags().DurationVar(&c.Timeout, "timeout", time.Minute, "how long a probe pod may take")
	return cmd
}

// newK8sPauseCmd is the main container of the audit DaemonSet's pods: it
// waits until the pod is deleted (SIGTERM cancels the context), so the pod
// stays Running after its init container printed the audit.
func newK8sPauseCmd() *cobra.Command {
	return hidden(command("pause", "Wait until terminated (the audit DaemonSet's main container)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			<-cmd.Context().Done()
			return nil
		}))
}

// newK8sNodeInfoCmd is what a run's node probe pods run.
func newK8sNodeInfoCmd() *cobra.Command {
	var c k8s.NodeInfoCommand
	cmd := hidden(command("node-info", "Print this node's kube-proxy mode, links, datapath agents and pod network as JSON (the run's probe pods)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error { return c.Run(cmd.Context(), cmd.OutOrStdout()) }))
	cmd.Flags().BoolVar(&c.Deep, "deep", false, "also ask the agents over their API and list the attached BPF programs (root, CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_NET_ADMIN)")
	return cmd
}

// newK8sAgentCPUCmd is what a run's agent meter pods run (--agent-cpu).
func newK8sAgentCPUCmd() *cobra.Command {
	var c k8s.AgentCPUCommand
	cmd := hidden(command("agent-cpu", "Print this node's datapath agents' CPU ticks as a JSON line per interval (the run's agent meter pods)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error { return c.Run(cmd.Context(), cmd.OutOrStdout()) }))
	cmd.Flags().DurationVar(&c.Interval, "interval", k8s.AgentInterval, "time between samples")
	return cmd
}

// newK8sWaitIdleCmd is what a run's settle probe pod runs (--settle-idle).
func newK8sWaitIdleCmd() *cobra.Command {
	var c k8s.WaitIdleCommand
	cmd := hidden(command("wait-idle", "Wait until this node's CPUs are idle enough (a run's settle probe pod)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error { return c.Run(cmd.Context(), cmd.OutOrStdout()) }))
	cmd.Flags().Float64Var(&c.MinIdle, "min-idle", 70, "percent of the CPUs idle")
	cmd.Flags().DurationVar(&c.Window, "window", k8s.SettleWindow, "the interval one reading covers")
	cmd.Flags().DurationVar(&c.Timeout, "timeout", k8s.SettleTimeout, "give up after this long")
	return cmd
}

// newK8sWaitTCPCmd is what the service scenario's probe pod runs.
func newK8sWaitTCPCmd() *cobra.Command {
	var c k8s.WaitTCPCommand
	cmd := hidden(command("wait-tcp HOST:PORT", "Wait until HOST:PORT accepts a TCP connection (the service scenario's probe pod)", cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string) error {
			c.Addr = args[0]
			return c.Run(cmd.Context(), cmd.OutOrStdout())
		}))
	cmd.Flags().DurationVar(&c.Timeout, "timeout", 5*time.Minute, "give up after this long")
	return cmd
}

// newK8sToolServerCmd is what a reference tool's server pod runs, and with
// --check its startup probe (driver.ToolServer).
func newK8sToolServerCmd() *cobra.Command {
	var c driver.ToolServer
	cmd := hidden(command("tool-server --engine qperf|iperf3|sockperf [--port N]", "Serve a reference tool's tests until terminated (a k8s run's tool server pods)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error { return c.Run(cmd.Context(), cmd.OutOrStdout()) }))
	cmd.Flags().StringVar(&c.Engine, "engine", "", "reference tool: qperf, iperf3 or sockperf")
	cmd.Flags().IntVar(&c.Port, "port", 0, "port to serve on (0: the tool's own default)")
	cmd.Flags().BoolVar(&c.Check, "check", false, "only check that every server has bound its port (the pod's startup probe)")
	return cmd
}
