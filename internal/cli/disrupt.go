package cli

import (
	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/disrupt"
)

// `cnibench disrupt run|report`: steady probes through a lab while events
// (a blackhole, kube-proxy's resync, an endpoint change, a policy set
// replaced) fire at recorded instants; timelines in buckets.
func newDisruptCmd() *cobra.Command {
	r := disrupt.RunCommand{Version: Version}
	run := command("run <experiment|file.yaml>", "Probe a lab steadily while events fire; per-event gap, loss, recovery and agent CPU",
		exactArgs(1, "disrupt run needs one disruption experiment (got %d arguments), e.g. cnibench disrupt run blackhole-resolution"),
		func(cmd *cobra.Command, args []string) error {
			r.Ref = args[0]
			return r.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	run.Long = disrupt.RunHelp()
	run.Example = disrupt.RunExamples
	run.Flags().StringVarP(&r.JSON, "output", "o", "", "write the result (timelines, events, comparisons) as JSON to this file")
	run.Flags().StringVar(&r.HTML, "html", "", "write the HTML page with the timelines to this file")
	addDBFlag(run, &r.DB)

	var rep disrupt.ReportCommand
	report := command("report <result.json|run>", "Render a disruption result, from its JSON file or the results database, as text, JSON or HTML",
		exactArgs(1, "disrupt report needs one result file or stored run (got %d arguments), e.g. cnibench disrupt report last --format html -o page.html"),
		func(cmd *cobra.Command, args []string) error {
			rep.Ref = args[0]
			return rep.Run(cmd.OutOrStdout())
		})
	report.Flags().StringVar(&rep.Format, "format", "text", "text, json or html")
	report.Flags().StringVarP(&rep.Output, "output", "o", "", "write to this file instead of stdout")
	addDBFlag(report, &rep.DB)
	return group("disrupt", "Disruption timelines: what a datapath's updates cost its traffic",
		"Probe a lab steadily while its datapath is updated (docs/disruption.md).", run, report)
}
