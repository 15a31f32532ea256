package lab

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The knob registry: one entry per knob with everything about it — its
// grammar and range, its help, which topologies take it (a rule over the
// topology rows' facts), what it needs beside it, how it takes effect and
// how that is undone. Resolve reads each knob's text once, through its
// entry, into the Spec's typed fields; the help of `cnibench lab up` and
// every refusal are made from the entries.

// knob is one knob's entry.
type knob struct {
	name string
	// help says which values it takes and what it does. The topologies
	// that take it are added from rule (helpText).
	help    string
	grammar grammar
	// rule says which topologies take it; nil: every one.
	rule *topoRule
	// offAnywhere: a value that turns it off ("off", 0) is accepted on
	// every topology, so one experiment can write it on every arm.
	offAnywhere bool
	// fits, when set, checks the stored value against the topology's own
	// limits (the pod MTU an OVS-DPDK port carries).
	fits func(s *Spec, t *topology) error
	// needs is another knob it only works with; nil: none.
	needs *knobNeed
	// apply is how it takes effect (apply.go).
	apply *applyStep
	// ovnApply, when set, is how it takes effect on a real OVN topology,
	// whose switches OVN programs (its northbound database).
	ovnApply *applyStep
	// undo says how its effect goes away when the lab does.
	undo string
}

// knobNeed is a knob another one needs set (to something not off).
type knobNeed struct {
	knob string
	says string // the refusal, after "knob NAME: "
	// unless, when set, names the topologies that need nothing beside the
	// knob (ovs-dpdk is a DPDK switch without the dpdk knob).
	unless func(t *topology) bool
	// evenOff: the knob needs the other even when set to its off value
	// (pmd_sleep=0 still configures a PMD).
	evenOff bool
}

// topoRule says which topologies take a knob, by a fact of their rows.
type topoRule struct {
	takes func(t *topology) bool
	// why says what the knob needs, when it is refused; "" when the list
	// of topologies says enough.
	why string
	// twoNodes: on a topology whose shape can change, it also needs two
	// nodes — checked once the whole spec is known (nodes may come after).
	twoNodes bool
}

// isRouted: the topology routes pod traffic through its nodes.
func isRouted(t *topology) bool { return t.routed == yes }

var (
	// onPodInterfaces: the pods have interfaces of their own (not lo).
	onPodInterfaces = &topoRule{takes: func(t *topology) bool { return t.loopback == no },
		why: "needs pod interfaces other than loopback"}
	onNetfilter = &topoRule{takes: func(t *topology) bool { return t.netfilter == yes }}
	onDPDK      = &topoRule{takes: func(t *topology) bool { return t.dpdk == yes }}
	onOVN       = &topoRule{takes: isOVN, why: "needs a real OVN topology"}
	// onPMD: the DPDK switch's knobs — ovs-dpdk's, and the OVN presets'
	// with dpdk=on (needsDPDK).
	onPMD = &topoRule{takes: func(t *topology) bool { return t.dpdk == yes || t.ovn == yes },
		why: "needs an OVS-DPDK switch"}
	needsDPDK = &knobNeed{knob: "dpdk", says: "needs dpdk=on (the OVN nodes' switches on OVS-DPDK)",
		unless: func(t *topology) bool { return t.dpdk == yes }, evenOff: true}
	// needsConntrack: the conntrack limits mean something only where the
	// lab's stateful rule makes the kernel track its flows.
	needsConntrack = &knobNeed{knob: "conntrack", says: "needs conntrack=on (the limits apply to the flows its stateful rule tracks)"}
)

// isOVN: real OVN programs the topology's switches.
func isOVN(t *topology) bool { return t.ovn == yes }

// The knobs, in the order `cnibench lab up --help` lists them.
var knobs = []*knob{
	{name: "mtu", help: "an integer 576..65535 (pod interface MTU)",
		grammar: intRange{lo: 576, hi: 65535, set: func(s *Spec, n int64) { s.MTU = int(n) }},
		rule:    onPodInterfaces, fits: podMTUFits,
		apply: byLayout, undo: "nothing to undo: the pods' interfaces go with the lab"},
	{name: "underlay_mtu", help: "an integer 576..65535 (node-to-node link MTU)",
		grammar: intRange{lo: 576, hi: 65535, set: func(s *Spec, n int64) { s.UnderlayMTU = int(n) }},
		apply:   byLayout, undo: "nothing to undo: the underlay link goes with the lab"},
	{name: "offloads", help: "on, off, or a list like gro=off,tso=off (features: gro gso tso tx rx sg lro)",
		grammar: custom(parseOffloadsKnob), rule: onPodInterfaces,
		apply: applyOffloadsStep, undo: "journal: each interface's ethtool features, restored on down"},
	{name: "conntrack", help: "on or off",
		grammar: onOff{set: func(s *Spec, on bool) { s.Conntrack = on }}, rule: onNetfilter, offAnywhere: true,
		apply: applyNftStep, undo: "nothing to undo: its nftables table is in the lab's namespaces"},
	{name: "fastpath", help: "ebpf or off (eBPF host routing on the nodes)",
		grammar: choice[FastpathMode]{values: []FastpathMode{FastpathEBPF}, offs: []string{"off", "none", ""},
			set: func(s *Spec, v FastpathMode) { s.Fastpath = v }},
		rule: &topoRule{takes: func(t *topology) bool { return t.fastpath.supported() },
			why: "needs two node namespaces that carry pod traffic", twoNodes: true},
		offAnywhere: true,
		apply:       applyFastpathStep, undo: "nothing to undo: the programs are attached in the lab's node namespaces"},
	{name: "notrack", help: "a comma-separated list of IPv4 CIDRs, e.g. 10.244.0.0/16",
		grammar: custom(parseNotrackKnob), rule: onNetfilter,
		apply: applyNftStep, undo: "nothing to undo: its nftables table is in the lab's namespaces"},
	{name: "conntrack_max", help: "an integer 64..4194304 (net.netfilter.nf_conntrack_max: entries each namespace's conntrack table holds; host-wide on kernels where a namespace cannot set it, 6.18 included)",
		grammar: intRange{lo: 64, hi: 4194304, set: func(s *Spec, n int64) { s.ConntrackMax = n }}, rule: onNetfilter,
		needs: needsConntrack, apply: applyConntrackLimitsStep,
		undo: "journal: nf_conntrack_max in the lab's namespaces, or on the host where it is host-wide"},
	{name: "conntrack_buckets", help: "an integer 1024..1048576 (the conntrack hash table's buckets, /sys/module/nf_conntrack/parameters/hashsize; always host-wide)",
		grammar: intRange{lo: 1024, hi: 1048576, set: func(s *Spec, n int64) { s.ConntrackBuckets = n }}, rule: onNetfilter,
		needs: needsConntrack, apply: applyConntrackLimitsStep,
		undo: "journal: the host's nf_conntrack hashsize, restored on down"},
	{name: "conntrack_timeout_established", help: "seconds 10..432000 (nf_conntrack_tcp_timeout_established where the stateful rule is)",
		grammar: intRange{lo: 10, hi: 432000, set: func(s *Spec, n int64) { s.CTTimeoutEstablished = int(n) }}, rule: onNetfilter,
		needs: needsConntrack, apply: applyConntrackLimitsStep,
		undo: "journal: the sysctl in the lab's namespaces (gone with them)"},
	{name: "conntrack_timeout_time_wait", help: "seconds 1..600 (nf_conntrack_tcp_timeout_time_wait where the stateful rule is)",
		grammar: intRange{lo: 1, hi: 600, set: func(s *Spec, n int64) { s.CTTimeoutTimeWait = int(n) }}, rule: onNetfilter,
		needs: needsConntrack, apply: applyConntrackLimitsStep,
		undo: "journal: the sysctl in the lab's namespaces (gone with them)"},
	{name: "services", help: "an integer 0..30000 (service VIPs; with proxy, kube-proxy's rules for them; on OVN, the VIPs of Kube-OVN's load balancers)",
		grammar: intRange{lo: 0, hi: maxServices, set: func(s *Spec, n int64) { s.Services = int(n) }},
		rule: &topoRule{takes: func(t *topology) bool { return t.services == yes },
			why: "needs a path from the client to a Service VIP"},
		offAnywhere: true,
		apply:       applyNftStep, ovnApply: byOVNNorthbound, undo: "nothing to undo: its nftables table (its OVN load balancers) is in the lab's namespaces (database)"},
	{name: "proxy", help: "iptables or nftables (kube-proxy's rules on every node; needs services)",
		grammar: choice[ProxyMode]{values: []ProxyMode{ProxyIPTables, ProxyNFTables}, offs: []string{"off", ""},
			set: func(s *Spec, v ProxyMode) { s.Proxy = v }},
		rule:        &topoRule{takes: isRouted, why: "kube-proxy's rules go in node namespaces that route pod traffic"},
		offAnywhere: true, needs: &knobNeed{knob: "services", says: "needs services=N (the Services kube-proxy programs)"},
		apply: applyProxyStep, undo: "nothing to undo: its rules are in the lab's node namespaces"},
	{name: "endpoints", help: "an integer 1..10 (endpoints per service, with proxy)",
		grammar: intRange{lo: 1, hi: maxEndpoints, set: func(s *Spec, n int64) { s.Endpoints = int(n) }},
		needs:   &knobNeed{knob: "proxy", says: "only with proxy=iptables or proxy=nftables"},
		apply:   applyProxyStep, undo: "nothing to undo: its rules are in the lab's node namespaces"},
	{name: "policies", help: "an integer 0..10000 (allowed peers on the server pod's ingress; on OVN, Kube-OVN's NetworkPolicy ACLs)",
		grammar: intRange{lo: 0, hi: maxPolicies, set: func(s *Spec, n int64) { s.Policies = int(n) }},
		rule: &topoRule{takes: func(t *topology) bool { return isRouted(t) || isOVN(t) },
			why: "the policy goes in the server's node namespace, or OVN's ACLs"}, offAnywhere: true,
		apply: applyPoliciesStep, ovnApply: byOVNNorthbound, undo: "nothing to undo: its nftables table is in the server's node namespace (its ACLs in the lab's OVN database)"},
	{name: "policy_mode", help: "linear or set (how policies are written: one rule per peer, or one set lookup)",
		grammar: choice[PolicyMode]{values: []PolicyMode{PolicyLinear, PolicySet}, set: func(s *Spec, v PolicyMode) { s.PolicyMode = v }},
		needs:   &knobNeed{knob: "policies", says: "needs policies=N"},
		apply:   applyPoliciesStep, ovnApply: byOVNNorthbound, undo: "nothing to undo: its nftables table is in the server's node namespace (its ACLs in the lab's OVN database)"},
	{name: "tunnel", help: "geneve or vxlan (ovn-encap-type between the OVN nodes; stt is refused: gone from Open vSwitch)",
		grammar: custom(parseTunnelKnob),
		rule:    &topoRule{takes: func(t *topology) bool { return isOVN(t) && t.tunnel != noTunnel }, why: "needs an OVN overlay"},
		apply:   byBuilder, undo: "nothing to undo: the lab's private OVS databases go with it"},
	{name: "router", help: "on or off (a second logical switch behind Kube-OVN's logical router, a pod on it per node)",
		grammar: onOff{set: func(s *Spec, on bool) { s.ovn().Router = on }}, rule: onOVN, offAnywhere: true,
		apply: byOVNNorthbound, undo: "nothing to undo: the lab's OVN database and pods go with it"},
	{name: "skip_conntrack", help: "a comma-separated list of IPv4 CIDRs (destinations that skip conntrack in OVN's switches: Kube-OVN's --skip-conntrack-dst-cidrs)",
		grammar: custom(parseSkipConntrackKnob), rule: onOVN,
		apply: byOVNNorthbound, undo: "nothing to undo: the lab's OVN database goes with it"},
	{name: "dpdk", help: "on or off (the OVN nodes' ovs-vswitchd built with DPDK: af_packet PMD ports, no hugepages)",
		grammar: onOff{set: func(s *Spec, on bool) {
			if on {
				s.dpdkSpec()
			} else {
				s.DPDK = nil
			}
		}},
		rule: onOVN, offAnywhere: true,
		apply: byBuilder, undo: "nothing to undo: the DPDK runtime directory goes with the lab"},
	{name: "rmem_max", help: "a byte count 4096..2147483647, e.g. 1073741824",
		grammar: intRange{lo: 4096, hi: 2147483647, set: func(s *Spec, n int64) { s.RmemMax = n }},
		apply:   applySocketBufsStep, undo: "journal: net.core.rmem_max in the lab's namespaces, or on the host where it is host-wide"},
	{name: "wmem_max", help: "a byte count 4096..2147483647, e.g. 1073741824",
		grammar: intRange{lo: 4096, hi: 2147483647, set: func(s *Spec, n int64) { s.WmemMax = n }},
		apply:   applySocketBufsStep, undo: "journal: net.core.wmem_max in the lab's namespaces, or on the host where it is host-wide"},
	{name: "ovs_sock_buf", help: "a byte count 212992..1073741823",
		grammar: intRange{lo: 212992, hi: 1073741823, set: func(s *Spec, n int64) { s.OVSSockBuf = n }},
		rule:    &topoRule{takes: func(t *topology) bool { return t.hostOVS == yes }},
		apply:   byBuilder, undo: "journal: the host's net.core.rmem_default and wmem_default, undone as soon as OVS added the ports"},
	{name: "nodes", help: "1 or 2",
		grammar: intRange{lo: 1, hi: 2, set: func(s *Spec, n int64) { s.Nodes = int(n) }},
		rule:    &topoRule{takes: func(t *topology) bool { return t.nodesKnob == yes }},
		apply:   byLayout, undo: "nothing to undo: the nodes go with the lab"},
	{name: "pods_per_node", help: "an integer 1..200",
		grammar: intRange{lo: 1, hi: 200, set: func(s *Spec, n int64) { s.PodsPerNode = int(n) }},
		rule:    &topoRule{takes: func(t *topology) bool { return t.podsKnob == yes }},
		apply:   byLayout, undo: "nothing to undo: the pods go with the lab"},
	{name: "pmd_cpus", help: "a CPU list such as 1 or 0-1 or 0,1 (the PMD threads' CPUs, pmd-cpu-mask; on OVN with dpdk=on)",
		grammar: custom(parsePMDCPUsKnob), rule: onPMD, needs: needsDPDK,
		apply: byBuilder, undo: "nothing to undo: the lab's private OVS database goes with it"},
	{name: "pmd_sleep", help: "microseconds 0..10000 (PMD load-based sleeping, pmd-maxsleep; 0 = never sleep; on OVN with dpdk=on)",
		grammar: intRange{lo: 0, hi: dpdkMaxSleepUs, set: func(s *Spec, n int64) { s.dpdkSpec().PMDSleepUs = int(n) }},
		rule:    onPMD, needs: needsDPDK, apply: byBuilder, undo: "nothing to undo: the lab's private OVS database goes with it"},
	{name: "userspace_tso", help: "on or off (userspace-tso-enable; on OVN with dpdk=on)",
		grammar: onOff{set: func(s *Spec, on bool) { s.dpdkSpec().UserspaceTSO = on }},
		rule:    onPMD, needs: needsDPDK, apply: byBuilder, undo: "nothing to undo: the lab's private OVS database goes with it"},
	{name: "hugepages", help: "an integer 64..8192 (2 MiB hugepages reserved while the lab is up)",
		grammar: intRange{lo: dpdkMinHugepages, hi: dpdkMaxHugepages, set: func(s *Spec, n int64) { s.DPDK.Hugepages = int(n) }},
		rule:    onDPDK, apply: byBuilder, undo: "journal: vm.nr_hugepages, where the host had too few free"},
	{name: "ring_frames", help: "a power of two 64..8192 (frames in each af_packet port's receive and transmit ring, DPDK framecnt; on OVN with dpdk=on)",
		grammar: intRange{lo: dpdkMinRingFrames, hi: dpdkMaxRingFrames, pow2: true, set: func(s *Spec, n int64) { s.dpdkSpec().RingFrames = int(n) }},
		rule:    onPMD, needs: needsDPDK, apply: byBuilder, undo: "nothing to undo: the ports go with the lab"},
}

// knobIndex finds an entry by name.
var knobIndex = func() map[string]*knob {
	m := make(map[string]*knob, len(knobs))
	for _, k := range knobs {
		m[k.name] = k
	}
	return m
}()

// KnobNames returns the knobs Resolve accepts, sorted.
func KnobNames() []string {
	out := make([]string, 0, len(knobs))
	for _, k := range knobs {
		out = append(out, k.name)
	}
	sort.Strings(out)
	return out
}

// KnobList is every knob with the values it takes and where, a line each
// (`cnibench lab up --help`).
func KnobList() string {
	var b strings.Builder
	for _, k := range knobs {
		fmt.Fprintf(&b, "  %-14s %s\n", k.name, k.helpText())
	}
	return b.String()
}

// knobHelp is the help of a knob, for messages that quote it.
func knobHelp(name string) string {
	if k, ok := knobIndex[name]; ok {
		return k.helpText()
	}
	return "knobs: " + strings.Join(KnobNames(), ", ")
}

// helpText is the entry's help with the topologies that take it.
func (k *knob) helpText() string {
	if k.rule == nil {
		return k.help
	}
	if h, ok := strings.CutSuffix(k.help, ")"); ok {
		return h + "; " + k.rule.where() + ")"
	}
	return k.help + " (" + k.rule.where() + ")"
}

// allowed names the topologies that take the knob, those that take it as
// they are first, then those that need two nodes for it ("bridge with
// nodes=2").
func (r *topoRule) allowed() []string {
	var as, reshaped []string
	for _, t := range topologies {
		switch {
		case !r.takes(t):
		case r.twoNodes && t.shape.nodes != 2:
			reshaped = append(reshaped, t.name+" with nodes=2")
		default:
			as = append(as, t.name)
		}
	}
	return append(as, reshaped...)
}

// where says, for help, where the knob is taken: "X only", the list, or —
// when only a few topologies refuse it — "not on A, B".
func (r *topoRule) where() string {
	allowed := r.allowed()
	if len(allowed) == 1 {
		return allowed[0] + " only"
	}
	var refused []string
	for _, t := range topologies {
		if !r.takes(t) {
			refused = append(refused, t.name)
		}
	}
	if len(refused) <= 3 && len(refused) < len(allowed) {
		return "not on " + strings.Join(refused, ", ")
	}
	return strings.Join(allowed, ", ")
}

// refuse is the error for the knob set on a topology (or shape) that does
// not take it.
func (k *knob) refuse(s *Spec) error {
	allowed := k.rule.allowed()
	if len(allowed) == 1 {
		return fmt.Errorf("knob %s: only the %s topology takes it (topology is %s)", k.name, allowed[0], s.Topology)
	}
	if k.rule.why != "" {
		what := "the " + s.Topology + " topology"
		if k.rule.takes(s.row()) { // refused for its shape (finish)
			what += fmt.Sprintf(" with nodes=%d", s.Nodes)
		}
		return fmt.Errorf("knob %s: %s; %s does not take it (allowed on %s)", k.name, k.rule.why, what, strings.Join(allowed, ", "))
	}
	return fmt.Errorf("knob %s: not for topology %s (allowed on %s)", k.name, s.Topology, strings.Join(allowed, ", "))
}

// podMTUFits refuses a pod MTU above what the topology's datapath carries.
func podMTUFits(s *Spec, t *topology) error {
	if s.MTU > t.podMTU.max {
		return fmt.Errorf("knob mtu: at most %d on %s (%s)", t.podMTU.max, t.name, t.podMTU.why)
	}
	return nil
}

// setKnob reads one knob's text into the spec, as `--set key=value` gives
// it. Unknown keys and bad values get one line naming the knob and what it
// allows; a knob the topology does not take, one naming where it is taken.
func (s *Spec) setKnob(key, text string) error {
	k, ok := knobIndex[key]
	if !ok {
		return fmt.Errorf("unknown knob %q (knobs: %s)", key, strings.Join(KnobNames(), ", "))
	}
	store, off, err := k.grammar.parse(text)
	if errors.Is(err, errBadValue) {
		return fmt.Errorf("knob %s: bad value %q (allowed: %s)", key, text, k.helpText())
	}
	if err != nil {
		return fmt.Errorf("knob %s: %v (allowed: %s)", key, err, k.helpText())
	}
	t := s.row()
	if k.rule != nil && !(off && k.offAnywhere) && !k.rule.takes(t) {
		return k.refuse(s)
	}
	store(s)
	if k.fits != nil {
		if err := k.fits(s, t); err != nil {
			return err
		}
	}
	if s.given == nil {
		s.given, s.active = map[string]string{}, map[string]bool{}
	}
	s.given[key], s.active[key] = text, !off
	return nil
}

// finish checks what only the whole spec shows — the shape, a knob that
// needs two nodes or another knob — and marks the spec resolved: Up
// builds it as it is.
func (s *Spec) finish() error {
	if s.Nodes < 2 && s.PodsPerNode < 2 {
		return fmt.Errorf("pods_per_node: a one-node %s topology needs at least 2 pods (client and server)", s.Topology)
	}
	for _, k := range knobs {
		if _, given := s.given[k.name]; !given {
			continue
		}
		if k.rule != nil && k.rule.twoNodes && s.Nodes != 2 && s.active[k.name] {
			return k.refuse(s)
		}
		n := k.needs
		if n == nil || s.active[n.knob] || (n.unless != nil && n.unless(s.row())) {
			continue
		}
		// A knob set to off needs nothing, except where being set at all
		// needs the other (a PMD setting without a DPDK switch).
		if s.active[k.name] || n.evenOff {
			return fmt.Errorf("knob %s: %s", k.name, n.says)
		}
	}
	if err := s.checkOVN(); err != nil {
		return err
	}
	s.resolved = true
	return nil
}

// uses reports whether a knob the spec sets takes effect through step.
func (s *Spec) uses(step *applyStep) bool {
	for _, k := range knobs {
		if k.step(s.row()) == step && s.active[k.name] {
			return true
		}
	}
	return false
}

// step is how the knob takes effect on topology t.
func (k *knob) step(t *topology) *applyStep {
	if k.ovnApply != nil && t.ovn == yes {
		return k.ovnApply
	}
	return k.apply
}

// The grammars a knob's text is read with.

// grammar reads a knob's text into a typed value.
type grammar interface {
	// parse reads text. store puts the typed value into a spec; off says
	// the value turns the knob off. err is errBadValue, or says what is
	// wrong with the text.
	parse(text string) (store func(*Spec), off bool, err error)
}

// errBadValue is a value outside the knob's grammar: its help says why.
var errBadValue = errors.New("bad value")

// intRange is an integer lo..hi (a power of two with pow2); 0 is off.
type intRange struct {
	lo, hi int64
	pow2   bool
	set    func(s *Spec, n int64)
}

func (g intRange) parse(text string) (func(*Spec), bool, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil || n < g.lo || n > g.hi || (g.pow2 && n&(n-1) != 0) {
		return nil, false, errBadValue
	}
	return func(s *Spec) { g.set(s, n) }, n == 0, nil
}

// onOff is on or off (also true/false, yes/no, 1/0).
type onOff struct{ set func(s *Spec, on bool) }

func (g onOff) parse(text string) (func(*Spec), bool, error) {
	var on bool
	switch strings.ToLower(strings.TrimSpace(text)) {
	case "on", "true", "yes", "1":
		on = true
	case "off", "false", "no", "0":
	default:
		return nil, false, errBadValue
	}
	return func(s *Spec) { g.set(s, on) }, !on, nil
}

// choice is one of a few words, in any case, or one of offs (stored as "").
type choice[T ~string] struct {
	values []T
	offs   []string
	set    func(s *Spec, v T)
}

func (g choice[T]) parse(text string) (func(*Spec), bool, error) {
	w := strings.ToLower(strings.TrimSpace(text))
	for _, v := range g.values {
		if w == string(v) {
			return func(s *Spec) { g.set(s, v) }, false, nil
		}
	}
	for _, off := range g.offs {
		if w == off {
			return func(s *Spec) { g.set(s, "") }, true, nil
		}
	}
	return nil, false, errBadValue
}

// custom is a value with its own parser, never off.
type custom func(text string) (func(*Spec), error)

func (g custom) parse(text string) (func(*Spec), bool, error) {
	store, err := g(text)
	return store, false, err
}

func parseOffloadsKnob(text string) (func(*Spec), error) {
	offs, err := parseOffloads(text)
	return func(s *Spec) { s.Offloads = offs }, err
}

func parseNotrackKnob(text string) (func(*Spec), error) {
	var nets CIDRs
	if err := nets.UnmarshalText([]byte(text)); err != nil {
		return nil, errBadValue
	}
	return func(s *Spec) { s.Notrack = nets }, nil
}

func parsePMDCPUsKnob(text string) (func(*Spec), error) {
	cpus, err := parseCPUList(strings.TrimSpace(text))
	return func(s *Spec) { s.dpdkSpec().PMDCPUs = cpus }, err
}
