package cli

import (
	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/pressure"
)

func newPressureCmd() *cobra.Command {
	c := experiment.PressureCommand{Version: Version}
	cmd := command("pressure FILE|NAME", "Hold N flows and ramp the new-connection rate on each arm until the datapath breaks; name the cause from its counters", cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string) error {
			c.Ref = args[0]
			return c.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = experiment.PressureHelp
	f := cmd.Flags()
	f.StringSliceVar(&c.Arms, "arms", nil, "ramp only these arms")
	f.IntSliceVar(&c.Flows, "flows", nil, "override pressure.flows: held flows, one ramp each")
	f.IntVar(&c.Repeats, "repeats", 0, "override pressure.repeats: ramps per arm and flows value, arms interleaved")
	f.BoolVar(&c.JSON, "json", false, "print the cnibench.pressure/v1 JSON document")
	f.StringVarP(&c.Output, "output", "o", "", "write the results to this file instead of standard output")
	addDBFlag(cmd, &c.DB)
	var rep pressure.ReportCommand
	report := command("report RUN", "Print a stored pressure run (an id, a name or last) again, as the run printed it", exactArgs(1, "pressure report needs one stored run (got %d arguments), e.g. cnibench pressure report last"),
		func(cmd *cobra.Command, args []string) error { rep.Ref = args[0]; return rep.Run(cmd.OutOrStdout()) })
	report.Flags().BoolVar(&rep.JSON, "json", false, "print the cnibench.pressure/v1 JSON document")
	report.Flags().StringVarP(&rep.Output, "output", "o", "", "write to this file instead of standard output")
	addDBFlag(report, &rep.DB)
	cmd.AddCommand(report)
	return cmd
}

// newPressureServerCmd is the server end of `cnibench pressure`, a process
// of its own in the lab's server namespace (pkg/pressure/serve.go).
func newPressureServerCmd() *cobra.Command {
	c := pressure.ServerCommand{}
	cmd := hidden(command("pressure-server", "The server end of `cnibench pressure` (started by it)", cobra.NoArgs,
		func(cmd *cobra.Command, args []string) error {
			return c.Run(cmd.InOrStdin(), cmd.OutOrStdout())
		}))
	cmd.Flags().StringVar(&c.Listen, "listen", "", "IPv4 address to listen on (port 7431)")
	return cmd
}
