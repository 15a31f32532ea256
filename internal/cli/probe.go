package cli

import (
	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/lab"
)

func newProbeCmd() *cobra.Command {
	var asJSON bool
	cmd := command("probe", "Show what this kernel and host offer for container datapaths, and how each was found", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			r, err := lab.Probe(cmd.Context())
			if err != nil {
				return err
			}
			return printAs(cmd.OutOrStdout(), asJSON, r, r.WriteText)
		})
	cmd.Long = `Probe tunnels (vxlan, geneve, ipip, gre, wireguard), netkit, IPsec ESP, Open vSwitch
(kernel, userspace, DPDK), VDUSE/vDPA, the eBPF pieces of a host-routing fast path
(BTF, bpf_redirect_peer/neigh, bpf_fib_lookup, tcx, XDP on veth), BIG TCP, IPVS, both
iptables backends, nftables, perf events, busy polling and the cpuidle driver.
Link and program checks run in a throwaway namespace named cnb-<id>-probe that is
removed at once; nothing on the host changes. Needs root for those checks.`
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
