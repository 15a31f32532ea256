package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/sysinfo"
)

// The hidden commands cnibench's own pods run, each what one kind of pod
// a run or an audit starts executes in the cluster.

// ExperimentText is what the store keeps as a k8s run's "experiment": the
// flags of the command at path as given, one per line, so the run can be
// repeated. --kubeconfig is left out: it names a file on the caller's host.
func ExperimentText(path string, flags *pflag.FlagSet) string {
	var b strings.Builder
	b.WriteString("# " + path + "\n")
	flags.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Name == "kubeconfig" {
			return
		}
		fmt.Fprintf(&b, "%s: %q\n", f.Name, f.Value.String())
	})
	return b.String()
}

// NodeInfoCommand is `cnibench k8s node-info`, what a run's node probe
// pods run: kube-proxy's mode, the node's links and datapath agents.
type NodeInfoCommand struct {
	// Deep also asks the agents over their API and lists the attached BPF
	// programs (the pod then runs privileged).
	Deep bool
}

// Run prints the node's NodeProbe as one JSON line, which the run reads
// from the pod's log.
func (c NodeInfoCommand) Run(ctx context.Context, w io.Writer) error {
	return json.NewEncoder(w).Encode(ProbeNode(ctx, KubeProxyMetricsAddr, "/proc", c.Deep))
}

// AgentCPUCommand is `cnibench k8s agent-cpu`, what a run's agent meter
// pods run (--agent-cpu).
type AgentCPUCommand struct{ Interval time.Duration }

// Run prints a JSON line of the node's datapath agents' CPU ticks per
// Interval until ctx ends. Below 10ms the kernel's tick (USER_HZ 100)
// cannot tell samples apart, so a shorter Interval is an ErrInvalid.
func (c AgentCPUCommand) Run(ctx context.Context, w io.Writer) error {
	if c.Interval < 10*time.Millisecond {
		return errkind.Errorf(ErrInvalid, "--interval %s: must be at least 10ms", c.Interval)
	}
	return RunAgentMeter(ctx, w, "/proc", c.Interval)
}

// WaitIdleCommand is `cnibench k8s wait-idle`, what a run's settle probe
// pod runs (--settle-idle).
type WaitIdleCommand struct {
	MinIdle         float64 // percent of the CPUs idle
	Window, Timeout time.Duration
}

// Run returns once this node's CPUs were MinIdle percent idle over one
// Window (WaitIdle), and says how idle after how long.
func (c WaitIdleCommand) Run(ctx context.Context, w io.Writer) error {
	d, idle, err := WaitIdle(ctx, sysinfo.Host.ReadStat, c.MinIdle, c.Window, c.Timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%.0f %% idle over %s after %.1fs\n", idle, c.Window, d.Seconds())
	return nil
}

// WaitTCPCommand is `cnibench k8s wait-tcp`, what the service scenario's
// probe pod runs.
type WaitTCPCommand struct {
	Addr    string // HOST:PORT
	Timeout time.Duration
}

// Run returns once Addr accepts a TCP connection (WaitTCP), and says
// after how long.
func (c WaitTCPCommand) Run(ctx context.Context, w io.Writer) error {
	d, err := WaitTCP(ctx, c.Addr, c.Timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s accepted after %.2fs\n", c.Addr, d.Seconds())
	return nil
}
