package tune

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/google/nftables"
)

// Connection tracking and kube-proxy: read only. Their sizes depend on the
// cluster's workload, which cnibench cannot know, so audit shows the numbers
// and the pressure instead of writing a value.

const ctFull = "use below 90% of nf_conntrack_max"

func init() {
	register(conntrackUseKnob(), conntrackHashKnob(), kubeProxyKnob())
}

func readInt(path string) (int64, error) {
	s, err := readFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: not a number: %q", path, strings.TrimSpace(s))
	}
	return n, nil
}

func conntrackMissing(e *Env, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("nf_conntrack is not loaded (%s/sys/net/netfilter/nf_conntrack_max does not exist): nothing is tracked", e.ProcRoot)
	}
	return err
}

// conntrackMax reads nf_conntrack_max, the table size both conntrack knobs
// measure against.
func conntrackMax(e *Env) (int64, error) {
	n, err := readInt(e.proc("sys/net/netfilter/nf_conntrack_max"))
	if err != nil {
		return 0, conntrackMissing(e, err)
	}
	return n, nil
}

func conntrackUseKnob() *Knob {
	src := "kernel nf_conntrack-sysctl.rst: a full table drops new flows (\"nf_conntrack: table full\")"
	return &Knob{
		ID: "conntrack.max", Title: "Conntrack table size against current use", Family: "conntrack", Scope: ScopeHost,
		Access: "/proc/sys/net/netfilter/nf_conntrack_max and nf_conntrack_count",
		Risk:   "a larger table costs kernel memory (about 300 bytes per entry)", AuditOnly: true,
		Why:    "raise net.netfilter.nf_conntrack_max (and hashsize) if use is high; cnibench does not pick a size",
		Recs:   both(ctFull, src, src),
		Source: src,
		Read: func(e *Env) ([]Current, error) {
			max, err := conntrackMax(e)
			if err != nil {
				return nil, err
			}
			count, err := readInt(e.proc("sys/net/netfilter/nf_conntrack_count"))
			if err != nil {
				return nil, err
			}
			if max <= 0 {
				return nil, fmt.Errorf("nf_conntrack_max is %d", max)
			}
			v := fmt.Sprintf("%d/%d entries (%.1f%%)", count, max, 100*float64(count)/float64(max))
			return []Current{{Value: v, Raw: v, hint: strconv.FormatBool(count*10 >= max*9)}}, nil
		},
		Judge: func(_ *Env, c Current, _ string) (Status, string, string) {
			if c.hint == "true" {
				return StatusDiffers, "", "table nearly full: new flows will be dropped"
			}
			return StatusOK, "", ""
		},
	}
}

func conntrackHashKnob() *Knob {
	return &Knob{
		ID: "conntrack.hashsize", Title: "Conntrack hash table buckets against nf_conntrack_max", Family: "conntrack",
		Scope:  ScopeHost,
		Access: "/sys/module/nf_conntrack/parameters/hashsize (+ nf_conntrack_max)",
		Risk:   "more buckets cost memory; fewer make lookups walk longer chains", AuditOnly: true,
		Source: "kernel nf_conntrack-sysctl.rst (nf_conntrack_buckets)",
		Why:    "shown for the record: entries per bucket = nf_conntrack_max / hashsize",
		Read: func(e *Env) ([]Current, error) {
			hs, err := readInt(e.sys("module/nf_conntrack/parameters/hashsize"))
			if err != nil {
				return nil, conntrackMissing(e, err)
			}
			max, err := conntrackMax(e)
			if err != nil {
				return nil, err
			}
			if hs <= 0 {
				return nil, fmt.Errorf("hashsize is %d", hs)
			}
			v := fmt.Sprintf("%d buckets, %.1f max entries per bucket", hs, float64(max)/float64(hs))
			return []Current{{Value: v, Raw: v}}, nil
		},
	}
}

// RuleCounter counts the packet-filter rules kube-proxy installed.
type RuleCounter interface {
	// KubeProxyRules returns rules in nftables table "kube-proxy" (nftables
	// mode) and in KUBE-* chains of other tables (iptables-nft mode).
	KubeProxyRules() (nftMode, iptablesNft int, err error)
}

type nftRules struct{}

func (nftRules) KubeProxyRules() (int, int, error) {
	c, err := nftables.New()
	if err != nil {
		return 0, 0, fmt.Errorf("nftables netlink: %w", err)
	}
	chains, err := c.ListChains()
	if err != nil {
		return 0, 0, fmt.Errorf("list nftables chains: %w", err)
	}
	var nft, ipt int
	for _, ch := range chains {
		kp := ch.Table.Name == "kube-proxy"
		if !kp && !strings.HasPrefix(ch.Name, "KUBE-") {
			continue
		}
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			return 0, 0, fmt.Errorf("list rules of %s %s: %w", ch.Table.Name, ch.Name, err)
		}
		if kp {
			nft += len(rules)
		} else {
			ipt += len(rules)
		}
	}
	return nft, ipt, nil
}

func kubeProxyKnob() *Knob {
	return &Knob{
		ID: "kube-proxy.rules", Title: "kube-proxy rules in netfilter and conntrack entries", Family: "kube-proxy",
		Scope:  ScopeNetns,
		Access: "nftables netlink (table kube-proxy, chains KUBE-*), /proc/net/ip_tables_names, nf_conntrack_count",
		Risk:   "none (read only)", AuditOnly: true, Source: srcKubeOVNLB,
		Why: "every packet of the host network walks these rules; see 000 (FastPath, disable OVN LB) and 004 (kube-proxy replacement)",
		Read: func(e *Env) ([]Current, error) {
			rc := e.Rules
			if rc == nil {
				rc = nftRules{}
			}
			nft, ipt, err := rc.KubeProxyRules()
			if err != nil {
				return nil, err
			}
			v := fmt.Sprintf("nftables kube-proxy: %d rules; iptables-nft KUBE-*: %d rules", nft, ipt)
			if b, err := os.ReadFile(e.proc("net/ip_tables_names")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				v += "; legacy iptables tables present (" + strings.Join(strings.Fields(string(b)), ",") + "): not counted"
			}
			if n, err := readInt(e.proc("sys/net/netfilter/nf_conntrack_count")); err == nil {
				v += fmt.Sprintf("; conntrack entries: %d", n)
			} else {
				v += "; conntrack entries: unknown (nf_conntrack not loaded)"
			}
			return []Current{{Value: v, Raw: v}}, nil
		},
	}
}
