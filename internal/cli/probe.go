package cli

import (
	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/probe"
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
	return cmd
}
