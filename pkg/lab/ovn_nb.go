package lab

import (
	"fmt"
	"net"
	"strings"

	"github.com/cnibench/cnibench/pkg/ovsdb"
)

// The northbound database of an OVN lab, written in one transaction before
// ovn-northd starts: Kube-OVN's logical network (github.com/kubeovn/kube-ovn
// at 1533681d7a6b, the files named below) on stock OVN 23.03, with the
// lab's knobs as Kube-OVN's objects.
//
//   - the distributed router ovn-cluster, one switch per subnet joined to
//     it by a router port (CreateLogicalSwitch → CreateLogicalPatchPort,
//     pkg/ovs/ovn-nb-logical_switch.go, pkg/ovs/ovn-nb.go): LSP
//     <switch>-ovn-cluster of type router ↔ LRP ovn-cluster-<switch> with
//     the subnet's gateway;
//   - a pod's port <pod>.<namespace> with "MAC IP" addresses;
//   - ovn-underlay: the default switch's localnet port
//     localnet.ovn-default (CreateLocalnetLogicalSwitchPort,
//     pkg/ovs/ovn-nb-logical_switch_port.go), the router port kept as the
//     subnet's logical gateway (subnet.go: needRouter);
//   - services=N (--enable-lb, pkg/controller/config.go): the six load
//     balancers initLoadBalancer makes per VPC (pkg/controller/init.go),
//     attached to every switch (LogicalSwitchUpdateLoadBalancers,
//     pkg/controller/subnet.go), N VIPs on the TCP one
//     (LoadBalancerAddVip, pkg/controller/endpoint_slice.go), the last
//     one — TCP and UDP — leading to the server;
//   - policies=N: a NetworkPolicy on the server as handleUpdateNp writes it
//     (pkg/controller/network_policy.go, pkg/ovs/ovn-nb-acl.go): a port
//     group, a default-deny ACL and allow-related ACLs over address sets;
//   - skip_conntrack=CIDRs: see ovnSkipConntrack.

// ovnPortName is a pod's logical switch port: Kube-OVN names it
// <pod>.<namespace>, and the pod's OVS interface carries it as iface-id.
func ovnPortName(p pod) string { return p.endpoint + "." + ovnNamespace }

// Kube-OVN's load balancers per VPC (pkg/controller/config.go): the
// session ones keep a client on its backend (selection_fields ip_src;
// Kube-OVN also names ipv6_src, which OVN 23.03's schema does not take).
var ovnLoadBalancers = []struct {
	name, proto string
	session     bool
}{
	{"cluster-tcp-loadbalancer", "tcp", false}, {"cluster-udp-loadbalancer", "udp", false},
	{"cluster-sctp-loadbalancer", "sctp", false}, {"cluster-tcp-session-loadbalancer", "tcp", true},
	{"cluster-udp-session-loadbalancer", "udp", true}, {"cluster-sctp-session-loadbalancer", "sctp", true},
}

// kubeOVN is the external_ids every Kube-OVN object carries.
var kubeOVN = map[string]string{"vendor": "kube-ovn"}

// ovnNorthbound is the whole northbound database of a lab: one
// transaction.
func ovnNorthbound(s *Spec, lo *layout) []ovsdb.Op {
	var ops []ovsdb.Op
	insert := func(table, uuidName string, row map[string]any) {
		o := ovsdb.Op{"op": "insert", "table": table, "row": row}
		if uuidName != "" {
			o["uuid-name"] = uuidName
		}
		ops = append(ops, o)
	}
	global := map[string]string{
		// Kube-OVN's SetUseCtInvMatch (pkg/ovs/ovn-nb_global.go): no
		// ct.inv drop flows, for the hardware offload it also supports.
		"use_ct_inv_match": "false",
	}
	if len(s.OVN.SkipConntrack) > 0 {
		// Kube-OVN's own option (SetSkipConntrackCidrs,
		// pkg/ovs/ovn-nb_global.go); stock ovn-northd ignores it, the
		// ACLs below do its work.
		global["skip_conntrack_dst_cidrs"] = s.OVN.SkipConntrack.String()
	}
	insert("NB_Global", "", map[string]any{"options": ovsdb.Map(global)})

	subnets := []*ovnSubnet{&ovnDefaultSubnet}
	if s.OVN.Router {
		subnets = append(subnets, &ovnSecondSubnet)
	}
	var lrps []any
	for _, sn := range subnets {
		lrp := "lrp_" + uuidSafe(sn.name)
		ones, _ := sn.cidr.Mask.Size()
		insert("Logical_Router_Port", lrp, map[string]any{"name": ovnRouterName + "-" + sn.name,
			"mac": ovnMAC(sn.gw).String(), "networks": ovsdb.Set(fmt.Sprintf("%s/%d", sn.gw, ones))})
		lrps = append(lrps, ovsdb.NamedUUID(lrp))
	}
	insert("Logical_Router", "", map[string]any{"name": ovnRouterName, "ports": ovsdb.Set(lrps...), "external_ids": ovsdb.Map(kubeOVN)})

	lbs := ovnLBs(s, lo, insert)
	var pgPorts []any
	for _, sn := range subnets {
		ls := uuidSafe(sn.name)
		insert("Logical_Switch_Port", "rp_"+ls, map[string]any{"name": sn.name + "-" + ovnRouterName, "type": "router",
			"addresses": ovsdb.Set("router"), "options": ovsdb.Map(map[string]string{"router-port": ovnRouterName + "-" + sn.name})})
		ports := []any{ovsdb.NamedUUID("rp_" + ls)}
		if sn == &ovnDefaultSubnet && s.OVN.Tunnel == "" {
			insert("Logical_Switch_Port", "ln_"+ls, map[string]any{"name": "localnet." + sn.name, "type": "localnet",
				"addresses": ovsdb.Set("unknown"), "options": ovsdb.Map(map[string]string{"network_name": ovnPhysnet}),
				"external_ids": ovsdb.Map(map[string]string{"ipv4_network": sn.cidr.String(), "vendor": "kube-ovn"})})
			ports = append(ports, ovsdb.NamedUUID("ln_"+ls))
		}
		for i, p := range lo.pods {
			if p.lsw != sn {
				continue
			}
			un := fmt.Sprintf("pod%d", i)
			insert("Logical_Switch_Port", un, map[string]any{"name": ovnPortName(p),
				"addresses":    ovsdb.Set(ovnMAC(p.ip).String() + " " + p.ip.String()),
				"external_ids": ovsdb.Map(map[string]string{"pod": ovnNamespace + "/" + p.endpoint, "ls": sn.name, "vendor": "kube-ovn"})})
			ports = append(ports, ovsdb.NamedUUID(un))
			if p.endpoint == "server" {
				pgPorts = append(pgPorts, ovsdb.NamedUUID(un))
			}
		}
		row := map[string]any{"name": sn.name, "ports": ovsdb.Set(ports...), "external_ids": ovsdb.Map(kubeOVN)}
		if len(lbs) > 0 {
			row["load_balancer"] = ovsdb.Set(lbs...)
		}
		if acls := ovnSkipConntrack(s, sn, insert); len(acls) > 0 {
			row["acls"] = ovsdb.Set(acls...)
		}
		insert("Logical_Switch", "", row)
	}
	if s.Policies > 0 {
		ovnNetworkPolicy(s, lo, pgPorts, insert)
	}
	return ops
}

// uuidSafe makes a name usable in a uuid-name ([A-Za-z_][A-Za-z0-9_]*).
func uuidSafe(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// ovnLBs inserts Kube-OVN's six load balancers with the services knob's
// VIPs and returns their references; none when services is 0 (Kube-OVN
// with --enable-lb=false removes them from the switches, subnet.go).
//
// VIP i is 10.96.x.y:80 with two backends no pod has (Kubernetes Services
// nobody dials); the last, 10.96.…:7420 in the TCP and the UDP load
// balancer, leads to the server's engine port. Stock OVN sends every IP
// packet of a switch with a non-empty load balancer through conntrack in
// both of its pipelines (ls_in_pre_lb / ls_out_pre_lb priority 100 "ip"),
// pod to pod included: that is what Kube-OVN's "Disable OVN LB" saves.
func ovnLBs(s *Spec, lo *layout, insert func(string, string, map[string]any)) []any {
	if s.Services == 0 {
		return nil
	}
	server, _ := lo.endpoints()
	tcp := make(map[string]string, s.Services)
	for i := 0; i < s.Services-1; i++ {
		tcp[serviceVIP(i).String()+":80"] = fmt.Sprintf("%s:80,%s:80", fillerBackend(i, 0), fillerBackend(i, 1))
	}
	last := fmt.Sprintf("%s:%d", serviceVIP(s.Services-1), ovnEnginePort)
	backend := fmt.Sprintf("%s:%d", server.ip, ovnEnginePort)
	tcp[last] = backend
	var refs []any
	for _, lb := range ovnLoadBalancers {
		opts := map[string]string{"prefer_local_backend": "false"} // Kube-OVN's SetLoadBalancerPreferLocalBackend
		row := map[string]any{"name": lb.name, "protocol": lb.proto, "external_ids": ovsdb.Map(kubeOVN)}
		if lb.session {
			row["selection_fields"] = ovsdb.Set("ip_src")
			opts["affinity_timeout"] = "10800"
		}
		switch lb.name {
		case "cluster-tcp-loadbalancer":
			row["vips"] = ovsdb.Map(tcp)
		case "cluster-udp-loadbalancer":
			opts["ct_flush"] = "true" // SetLoadBalancerCtFlush; OVN 23.03 ignores it
			row["vips"] = ovsdb.Map(map[string]string{last: backend})
		}
		row["options"] = ovsdb.Map(opts)
		un := "lb_" + uuidSafe(lb.name)
		insert("Load_Balancer", un, row)
		refs = append(refs, ovsdb.NamedUUID(un))
	}
	return refs
}

// fillerBackend is backend j of filler Service i: an address in the
// default subnet's upper half, where no lab pod lives.
func fillerBackend(i, j int) net.IP {
	return net.IPv4(10, 16, byte(128+64*j+(i>>8)%64), byte(i)).To4()
}

// ovnSkipConntrack inserts the skip_conntrack knob's ACLs of switch sn and
// returns their references.
//
// Kube-OVN's --skip-conntrack-dst-cidrs is implemented only in its own
// patched ovn-northd (dist/images/patches/737d9f93….patch, applied by
// dist/images/Dockerfile.base): per switch, ls_in_pre_lb priority 105
// "ip4 && ip4.dst == CIDR" → next, so matching packets skip the ingress
// pipeline's conntrack. Stock OVN 23.03 ignores the option. The stand-in
// that gives the same flows on stock OVN: an allow-stateless ACL
// (from-lport, priority 32000, that match), for which northd adds
// ls_in_pre_acl priority 33000 "reg0[16] = 1; next" and ls_in_acl 33000
// "next", and whose mark its existing ls_in_pre_lb priority-110 flow
// "reg0[16] == 1 → next" honours: the ingress pipeline skips conntrack
// for those destinations (a VIP inside them too, as with the patch's 105
// over the VIPs' 100); the egress pipeline still uses it, as with the
// patch. Checked by diffing `ovn-sbctl lflow-list` with and without.
func ovnSkipConntrack(s *Spec, sn *ovnSubnet, insert func(string, string, map[string]any)) []any {
	var refs []any
	for i, c := range s.OVN.SkipConntrack {
		un := fmt.Sprintf("skipct_%s_%d", uuidSafe(sn.name), i)
		insert("ACL", un, map[string]any{"direction": "from-lport", "priority": 32000, "action": "allow-stateless",
			"match":        "ip4 && ip4.dst == " + c.String(),
			"external_ids": ovsdb.Map(map[string]string{"vendor": "kube-ovn", "cnibench": "skip-conntrack stand-in"})})
		refs = append(refs, ovsdb.NamedUUID(un))
	}
	return refs
}

// ovnNetworkPolicy inserts Kube-OVN's ingress NetworkPolicy "np" of
// namespace default on the server (handleUpdateNp): port group np.default
// with the server's port, a to-lport default-deny ACL at priority 2000
// (UpdateDefaultBlockACLOps, "outport == @pg && ip"), and allow-related
// ACLs at 2001 (UpdateIngressACLOps) over address sets
// np.default.ingress.allow.IPv4.<i> and …except.IPv4.<i>. Kube-OVN's
// tier=2 is left out: OVN 23.03's ACL table has no tier column.
//
// policy_mode=linear: N rules, one peer each, the last one node1's pods (a
// connection passes the others first); set: one rule whose allow set holds
// N-1 peers no pod has and node1's pods.
func ovnNetworkPolicy(s *Spec, lo *layout, ports []any, insert func(string, string, map[string]any)) {
	const pg = "np." + ovnNamespace
	ext := map[string]string{"parent": pg, "vendor": "kube-ovn"}
	// The allowed peers are node1's pods: the client and its neighbours.
	// Node2's other pods are not, so the default deny is there to see.
	var clients []any
	for _, p := range lo.pods {
		if p.node == 1 {
			clients = append(clients, p.ip.String())
		}
	}
	insert("ACL", "np_drop", map[string]any{"direction": "to-lport", "priority": 2000, "action": "drop",
		"match": "outport == @" + pg + " && ip", "external_ids": ovsdb.Map(ext)})
	acls := []any{ovsdb.NamedUUID("np_drop")}
	rules := s.Policies
	if s.PolicyMode == PolicySet {
		rules = 1
	}
	for r := 0; r < rules; r++ {
		var peers []any
		switch {
		case s.PolicyMode == PolicySet:
			for i := 0; i < s.Policies-1; i++ {
				peers = append(peers, policyFiller(i).String())
			}
			peers = append(peers, clients...)
		case r == rules-1:
			peers = clients
		default:
			peers = []any{policyFiller(r).String()}
		}
		allow := fmt.Sprintf("%s.ingress.allow.IPv4.%d", pg, r)
		except := fmt.Sprintf("%s.ingress.except.IPv4.%d", pg, r)
		setExt := ovsdb.Map(map[string]string{"np": ovnNamespace + "/np/ingress", "vendor": "kube-ovn"})
		insert("Address_Set", "", map[string]any{"name": allow, "addresses": ovsdb.Set(peers...), "external_ids": setExt})
		insert("Address_Set", "", map[string]any{"name": except, "external_ids": setExt})
		un := fmt.Sprintf("np_allow%d", r)
		insert("ACL", un, map[string]any{"direction": "to-lport", "priority": 2001, "action": "allow-related",
			"match":        fmt.Sprintf("outport == @%s && ip && ip4.src == $%s && ip4.src != $%s", pg, allow, except),
			"external_ids": ovsdb.Map(ext)})
		acls = append(acls, ovsdb.NamedUUID(un))
	}
	insert("Port_Group", "", map[string]any{"name": pg, "ports": ovsdb.Set(ports...), "acls": ovsdb.Set(acls...),
		"external_ids": ovsdb.Map(map[string]string{"np": ovnNamespace + "/np", "vendor": "kube-ovn"})})
}

// policyFiller is the i-th allowed peer no pod has: 10.18.0.0/16, outside
// every subnet of the lab.
func policyFiller(i int) net.IP { return net.IPv4(10, 18, byte(i>>8), byte(i)).To4() }
