package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/datapath"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/pathmtu"
	"github.com/cnibench/cnibench/pkg/probe"
	"github.com/cnibench/cnibench/pkg/result"
)

func newProbeCmd() *cobra.Command {
	cmd := showCmd("probe", "Show what this kernel and host offer for container datapaths, and how each was found", "print the report as JSON", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (*probe.Report, error) { return lab.Probe(cmd.Context()) }, (*probe.Report).WriteText)
	cmd.Long = lab.ProbeHelp
	cmd.AddCommand(newProbeAttachedCmd(), newProbeMTUCmd())
	return cmd
}

func newProbeMTUCmd() *cobra.Command {
	var c lab.ProbeMTUCommand
	cmd := showCmd("mtu", "Measure a path's MTU (don't-fragment probes; ok, limited by ICMP, or a black hole) and TCP's MSS over it", "print the path as JSON", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (*result.PathMTU, error) { return c.Run(cmd.Context()) },
		func(p *result.PathMTU, w io.Writer) error { return pathmtu.WriteText(w, p) })
	cmd.Long = lab.ProbeMTUHelp
	cmd.Example = lab.ProbeMTUExamples
	f := cmd.Flags()
	f.StringVar(&c.Lab, "lab", "", "the lab whose path to probe")
	f.StringVar(&c.From, "from", "", "with --lab: the client endpoint (default client)")
	f.StringVar(&c.To, "to", "", "with --lab: the server endpoint (default server)")
	f.StringVar(&c.Netns, "netns", "", "with --server: the namespace (under /run/netns) to probe from")
	f.StringVar(&c.Server, "server", "", "a cnibench server: HOST or HOST:PORT (port 7420 by default)")
	return cmd
}

func newProbeAttachedCmd() *cobra.Command {
	var c datapath.AttachedCommand
	cmd := showCmd("attached", "List the BPF programs attached per device and direction (tcx, tc, XDP) and on cgroups", "print the programs as JSON", cobra.NoArgs,
		func(*cobra.Command, []string) ([]datapath.Program, error) { return c.Run() }, func(ps []datapath.Program, w io.Writer) error { return datapath.WriteAttached(w, ps) })
	cmd.Long = datapath.AttachedHelp
	cmd.Flags().StringVar(&c.Netns, "netns", "", "network namespace (under /run/netns) whose devices to list (default: this one)")
	cmd.Flags().StringArrayVar(&c.Cgroups, "cgroup", nil, "cgroup v2 directory whose programs to list (repeatable), e.g. /sys/fs/cgroup")
	return cmd
}
