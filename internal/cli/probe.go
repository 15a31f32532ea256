package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/cnibench/cnibench/pkg/lab"
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
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "kernel %s, probed in %v\n", r.Kernel, r.Took.Round(1e6))
			for _, c := range r.Capabilities {
				state := "undecided"
				if c.Supported != nil {
					state = map[bool]string{true: "yes", false: "no"}[*c.Supported]
				}
				detail := c.How
				if c.Detail != "" {
					detail += ": " + c.Detail
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", c.ID, state, detail)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
