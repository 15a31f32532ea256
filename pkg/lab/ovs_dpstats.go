package lab

import "context"

// DatapathShow is `ovs-appctl dpctl/show` against the meter's
// ovs-vswitchd: each datapath's lookups (hit, missed — each miss is an
// upcall —, lost) and its flow count, as text for the caller to parse
// (pkg/pressure). On ovs-netdev it is the host's daemon, so other bridges'
// traffic is in the figures too.
func (m *DatapathMeter) DatapathShow(ctx context.Context) (string, error) {
	return run(ctx, "", m.env, "ovs-appctl", "--timeout=5", "-t", m.ctl, "dpctl/show")
}
