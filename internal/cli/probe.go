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
	cmd.Long = `Probe tunnels (vxlan, geneve, ipip, gre, wireguard), netkit, IPsec ESP, Open vSwitch
(kernel, userspace, DPDK), VDUSE/vDPA, the eBPF pieces of a host-routing fast path
(BTF, bpf_redirect_peer/neigh, bpf_fib_lookup, tcx, XDP on veth), BIG TCP, IPVS, both
iptables backends, nftables, perf events, busy polling and the cpuidle driver.
Link and program checks run in a throwaway namespace named cnb-<id>-probe that is
removed at once; nothing on the host changes. Needs root for those checks.`
	cmd.AddCommand(newProbeAttachedCmd(), newProbeMTUCmd())
	return cmd
}

func newProbeMTUCmd() *cobra.Command {
	var c lab.ProbeMTUCommand
	cmd := showCmd("mtu", "Measure a path's MTU (don't-fragment probes; ok, limited by ICMP, or a black hole) and TCP's MSS over it", "print the path as JSON", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) (*result.PathMTU, error) { return c.Run(cmd.Context()) },
		func(p *result.PathMTU, w io.Writer) error { return pathmtu.WriteText(w, p) })
	cmd.Long = `Finds the largest IPv4 packet that crosses a path and is answered, with UDP probes
that may not be fragmented, and how it is bounded: the client's own link ("ok"), a
router's ICMP fragmentation-needed ("limited by ICMP"), or a size that neither arrives
nor brings an ICMP error back ("black hole above N"); then the MSS TCP negotiates on a
connection to the same port. At most 2 s per path. A lab's path (--lab; a responder
answers in the server's namespace on port 7420), or from --netns (default: here) to a
running cnibench server, whose UDP port answers the probes. Needs root for namespaces.`
	cmd.Example = `  cnibench probe mtu --lab demo                       # client → server
  cnibench probe mtu --lab demo --from node1 --to node2
  cnibench probe mtu --netns k8slab-n1 --server 10.244.2.7`
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
	cmd.Long = `Lists every BPF program attached to a network device — tcx and netkit (by
BPF_PROG_QUERY, which Debian 12's bpftool cannot show), clsact cls_bpf filters, XDP —
by device and direction, and on the cgroup directories given (a socket load balancer's
connect4, sendmsg4, … programs), with each program's id, full name (from
/proc/kallsyms), tag and run count (counted while kernel.bpf_stats_enabled=1).
--netns lists another network namespace's devices (a k8slab node: --netns k8slab-n1).
Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN).`
	cmd.Flags().StringVar(&c.Netns, "netns", "", "network namespace (under /run/netns) whose devices to list (default: this one)")
	cmd.Flags().StringArrayVar(&c.Cgroups, "cgroup", nil, "cgroup v2 directory whose programs to list (repeatable), e.g. /sys/fs/cgroup")
	return cmd
}
