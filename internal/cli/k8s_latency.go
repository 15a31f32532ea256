package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/k8s"
	"github.com/cnibench/cnibench/pkg/store"
)

// `cnibench k8s latency`: control plane to datapath latencies over N
// trials (pkg/k8s/latency.go); `k8s latency-agent` is what its pods run.
func newK8sLatencyCmd() *cobra.Command {
	c := k8s.LatencyCommand{Version: Version}
	cmd := command("latency", "Time a new Service, NetworkPolicy and pod until every node's datapath acts on it, over N trials", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			c.Experiment = k8sExperimentText(cmd)
			return c.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = k8s.LatencyHelp
	c.Cluster.AddFlags(cmd.Flags(), true)
	f := cmd.Flags()
	f.IntVar(&c.Trials, "trials", 20, "trials per kind")
	f.IntVar(&c.Services, "services", 0, "filler Services the cluster holds meanwhile (as k8s run --services)")
	f.StringVar(&c.Kinds, "kinds", "service,policy,pod", "what to time: service, policy, pod, or all")
	f.DurationVar(&c.Timeout, "timeout", 2*time.Minute, "a trial that has not reached every node by then fails")
	f.DurationVar(&c.ReadyTimeout, "ready-timeout", 2*time.Minute, "how long a pod may take to become ready")
	f.BoolVar(&c.JSON, "json", false, "print every trial and the distributions as JSON")
	f.BoolVar(&c.Keep, "keep", false, "leave the run's objects for debugging")
	f.StringVar(&c.DBPath, "db", store.DefaultPath(), "results database (also $CNIBENCH_DB)")
	f.StringArrayVar(&c.Summarize, "summarize", nil, "instead of measuring: a --json document's Service trials by kube-proxy's syncs; given twice, the second judged against the first per group")
	return cmd
}

// newK8sLatencyAgentCmd is what k8s latency's agent and new pods run.
func newK8sLatencyAgentCmd() *cobra.Command {
	var a k8s.LatencyAgent
	agent := hidden(command("latency-agent", "Answer on --listen and print each change of the --target probes (k8s latency's pods)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error { return a.Run(cmd.Context(), cmd.OutOrStdout()) }))
	agent.Flags().StringVar(&a.Listen, "listen", "", "address to accept connections on, e.g. :7421")
	agent.Flags().StringArrayVar(&a.Targets, "target", nil, "NAME=HOST:PORT to connect to every 5ms (repeatable)")
	agent.Flags().BoolVar(&a.UntilOK, "until-ok", false, "exit once every target has answered")
	agent.Flags().DurationVar(&a.Deadline, "deadline", 0, "with --until-ok: give up after this long")
	agent.Flags().StringVar(&a.KubeProxyMetrics, "kube-proxy-metrics", "", "instead: print kube-proxy's sync counters from HOST:PORT/metrics as JSON lines (k8s latency's watcher pods)")
	return agent
}
