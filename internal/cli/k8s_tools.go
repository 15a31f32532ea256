package cli

import (
	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/driver"
)

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
