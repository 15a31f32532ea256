package cli

import (
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/spf13/cobra"
)

func newProbeCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Show what this kernel and host offer for container datapaths, and how each was found",
		Long: `Probe tunnels (vxlan, geneve, ipip, gre, wireguard), netkit, IPsec ESP, Open vSwitch
(kernel, userspace, DPDK), VDUSE/vDPA, the eBPF pieces of a host-routing fast path
(BTF, bpf_redirect_peer/neigh, bpf_fib_lookup, tcx, XDP on veth), BIG TCP, IPVS, both
iptables backends, nftables, perf events, busy polling and the cpuidle driver.
Link and program checks run in a throwaway namespace named cnb-<id>-probe that is
removed at once; nothing on the host changes. Needs root for those checks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := lab.Probe(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return report.WriteJSON(cmd.OutOrStdout(), r)
			}
			return r.WriteText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
