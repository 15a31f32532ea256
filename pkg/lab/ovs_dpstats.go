package lab

import (
	"context"
	"strings"
)

// DatapathShow is `ovs-appctl dpctl/show` against each of the meter's
// ovs-vswitchds, the outputs one after the other: each datapath's lookups
// (hit, missed — each miss is an upcall —, lost) and its flow count, as
// text for the caller to parse (pkg/pressure). On ovs-netdev it is the
// host's daemon, so other bridges' traffic is in the figures too.
func (m *DatapathMeter) DatapathShow(ctx context.Context) (string, error) {
	var b strings.Builder
	for _, d := range m.daemons {
		out, err := run(ctx, "", m.env, "ovs-appctl", "--timeout=5", "-t", d.ctl, "dpctl/show")
		if err != nil {
			return "", err
		}
		b.WriteString(out)
		b.WriteString("\n")
	}
	return b.String(), nil
}
