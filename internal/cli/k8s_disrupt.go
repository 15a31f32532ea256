package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/k8s"
)

// `cnibench k8s disrupt` (pkg/k8s/disrupt.go) and `k8s disrupt-agent`, what its pods run.
func newK8sDisruptCmd() *cobra.Command {
	c := k8s.DisruptCommand{Version: Version}
	cmd := command("disrupt", "Probe a Service or pod while Services, endpoints, policies or an agent change; timelines per event", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			c.Experiment = k8sExperimentText(cmd)
			return c.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	c.Cluster.AddFlags(cmd.Flags(), true)
	f := cmd.Flags()
	f.StringVar(&c.Probes, "probes", "udp-rr,tcp-crr", "probes, each KIND[=RATE/s]: udp-rr (default 1000/s), tcp-crr (200/s)")
	f.DurationVar(&c.Timeout, "timeout", 500*time.Millisecond, "a request unanswered by then is lost")
	f.StringVar(&c.Target, "target", "service", "what the probes dial: service (a ClusterIP in front of the echo) or pod")
	f.IntVar(&c.Services, "services", 0, "filler Services the cluster holds meanwhile (as k8s run --services)")
	f.StringVar(&c.Events, "events", "endpoint-change,service-churn", "comma list of service-churn, endpoint-change, policy-churn, agent-restart, blackhole")
	f.DurationVar(&c.BlackholeFor, "blackhole", 200*time.Millisecond, "blackhole: how long the probes' port is dropped on the client's node")
	f.IntVar(&c.Repeats, "repeats", 5, "rounds of the event list")
	f.DurationVar(&c.Settle, "settle", 3*time.Second, "probing before the first event (the baseline)")
	f.DurationVar(&c.Spacing, "spacing", 4*time.Second, "from one event to the next (a lasting change is undone half way)")
	f.StringVar(&c.Agent, "agent", "kube-proxy", "agent-restart: the agent whose pod on the server's node is deleted: kube-proxy, flannel, cilium")
	f.StringVar(&c.RestartCmd, "restart-cmd", "", "agent-restart: a shell command that restarts the agent instead (CNB_NODE = the server's node); the event lasts until it exits")
	f.StringVar(&c.ClientNode, "client-node", "", "the probes' node (default: first usable node)")
	f.StringVar(&c.ServerNode, "server-node", "", "the echo's node (default: the next usable node)")
	f.StringVar(&c.Arm, "arm", "", "this run's arm name (default: the CNI and kube-proxy mode, e.g. flannel-iptables)")
	f.StringVar(&c.Against, "against", "", "an earlier result (-o) whose arms this run is compared with")
	f.StringVarP(&c.JSON, "output", "o", "", "write the result as JSON")
	f.StringVar(&c.HTML, "html", "", "write the timelines as an HTML page")
	f.BoolVar(&c.Keep, "keep", false, "leave the run's objects for debugging")
	addDBFlag(cmd, &c.DBPath)
	return cmd
}

func newK8sDisruptAgentCmd() *cobra.Command {
	var a k8s.DisruptAgent
	agent := hidden(command("disrupt-agent", "Echo on --echo PORT, or run one --probe and print its requests (k8s disrupt's pods)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error { return a.Run(cmd.Context(), cmd.OutOrStdout()) }))
	af := agent.Flags()
	af.IntVar(&a.Echo, "echo", 0, "echo the probes on this UDP and TCP port")
	af.StringVar(&a.Probe, "probe", "", "KIND=RATE: udp-rr or tcp-crr, requests per second")
	af.StringVar(&a.Target, "target", "", "IPv4:PORT of the echo")
	af.DurationVar(&a.Timeout, "timeout", 500*time.Millisecond, "a request unanswered by then is lost")
	af.Int64Var(&a.T0, "t0", 0, "the first request's instant, Unix ns")
	af.DurationVar(&a.Duration, "duration", 0, "how long to send")
	af.IntVar(&a.Blackhole, "blackhole", 0, "drop this TCP and UDP port on the pod's network from --t0 + each --at for --hold")
	af.StringVar(&a.Table, "table", "", "the blackhole's nftables table")
	af.DurationSliceVar(&a.At, "at", nil, "the blackholes' instants after --t0")
	af.DurationVar(&a.Hold, "hold", 0, "how long each blackhole holds")
	return agent
}
