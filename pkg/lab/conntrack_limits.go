package lab

import (
	"context"
	"strconv"
)

// The conntrack limits knobs (conntrack_max, conntrack_buckets and the TCP
// timeouts): the sizes that decide when a datapath's conntrack table is
// full. They go through the lab's journal like every other setting. Which
// of them a namespace can set is the kernel's choice: on 6.18 the TCP
// timeouts are per namespace, nf_conntrack_max is read-only in every
// namespace but the host's (one value, compared with each namespace's own
// count), and the hash table's size is a module parameter — so the last two
// are host-wide, and a lab that sets them is built around its own steps only
// (ChangesHost).

// hashsizeSysfs is the module parameter that resizes the conntrack hash
// table (what nf_conntrack_buckets shows), below /sys.
const hashsizeSysfs = "module/nf_conntrack/parameters/hashsize"

// conntrackNamespaces are the namespaces the lab's stateful rule is in: the
// nodes where they route pod traffic, otherwise the server pod (as applyNft
// places it).
func (b *builder) conntrackNamespaces() []string {
	if b.s.row().routed == yes {
		return b.lo.nodeNS
	}
	server, _ := b.lo.endpoints()
	return []string{server.netns}
}

// applyConntrackLimits sets the conntrack limits knobs the spec has.
func (b *builder) applyConntrackLimits(ctx context.Context) error {
	nsList := b.conntrackNamespaces()
	if b.s.ConntrackMax > 0 {
		name, value := "net.netfilter.nf_conntrack_max", strconv.FormatInt(b.s.ConntrackMax, 10)
		per, err := nsSysctlWritable(nsList[0], name)
		if err != nil {
			return err
		}
		if per {
			for _, ns := range nsList {
				if err := b.sysctl(ns, name, value); err != nil {
					return err
				}
			}
		} else {
			b.logf("%s is host-wide on this kernel: setting it on the host until `lab down` (journal %s)", name, journalDir())
			if err := b.sysctl("", name, value); err != nil {
				return err
			}
		}
	}
	if b.s.ConntrackBuckets > 0 {
		b.logf("the conntrack hash table's size is host-wide: setting %s on the host until `lab down` (journal %s)", hashsizeSysfs, journalDir())
		j, err := b.journal()
		if err != nil {
			return err
		}
		if err := j.SetSysfs(hashsizeSysfs, strconv.FormatInt(b.s.ConntrackBuckets, 10)); err != nil {
			return err
		}
	}
	for _, t := range []struct {
		name string
		v    int
	}{{"net.netfilter.nf_conntrack_tcp_timeout_established", b.s.CTTimeoutEstablished},
		{"net.netfilter.nf_conntrack_tcp_timeout_time_wait", b.s.CTTimeoutTimeWait}} {
		if t.v == 0 {
			continue
		}
		for _, ns := range nsList {
			if err := b.sysctl(ns, t.name, strconv.Itoa(t.v)); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}
