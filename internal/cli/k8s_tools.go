package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/driver"
)

// newK8sToolServerCmd is what a reference tool's server pod runs: the
// tool's own server commands (the lab driver's, persistent) until the pod
// is deleted. With --check it is the pod's startup probe instead: it exits
// 0 once every one of those servers has bound its port in the pod's
// network namespace, read from /proc/thread-self/net (no connection is
// made; /proc/self/net would be the main thread's namespace).
func newK8sToolServerCmd() *cobra.Command {
	var engine string
	var port int
	var check bool
	cmd := hidden(command("tool-server --engine qperf|iperf3|sockperf [--port N]", "Serve a reference tool's tests until terminated (a k8s run's tool server pods)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			d, err := driver.Lookup(engine)
			if err != nil || engine == "builtin" {
				return UsageError{fmt.Errorf("--engine %q: want qperf, iperf3 or sockperf", engine)}
			}
			if check {
				return driver.Listening(d, port, "/proc/thread-self/net")
			}
			err = driver.Serve(cmd.Context(), d, port, cmd.OutOrStdout())
			if errors.Is(err, driver.ErrNotInstalled) {
				// The pod's log ends with this line; k8s run shows it.
				return fmt.Errorf("%s is not in this image (PATH=%s): build the image with `cnibench image build --with-tools` on a host that has %s, load it on every node and run again", engine, os.Getenv("PATH"), engine)
			}
			return err
		}))
	cmd.Flags().StringVar(&engine, "engine", "", "reference tool: qperf, iperf3 or sockperf")
	cmd.Flags().IntVar(&port, "port", 0, "port to serve on (0: the tool's own default)")
	cmd.Flags().BoolVar(&check, "check", false, "only check that every server has bound its port (the pod's startup probe)")
	return cmd
}
