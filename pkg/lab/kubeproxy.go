package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net"
	"os/exec"
	"strings"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/google/nftables"
)

// kube-proxy as it programs a node: the proxy=iptables|nftables knobs.
//
// The generators below write the rule sets kube-proxy itself writes for
// ClusterIP services (pkg/proxy/iptables and pkg/proxy/nftables of
// Kubernetes), with the same chain names, hashing, endpoint choice and
// masquerade marking, so that a node's netfilter does the same work per
// packet and per connection. Only what a ClusterIP service needs is
// generated (no NodePorts, load balancers, health checks or IPv6).

// ProxyMode is the proxy knob's value: which of kube-proxy's modes writes
// the Services' rules on every node.
type ProxyMode string

// Proxy modes of the proxy knob.
const (
	ProxyIPTables ProxyMode = "iptables"
	ProxyNFTables ProxyMode = "nftables"
)

// The measured service: the server pod behind the LAST service, on the
// built-in engine's port for both TCP and UDP, so an iptables-mode first
// packet walks every KUBE-SERVICES rule before it matches.
const (
	servicePort  = 7420
	otherPort    = 80 // every other service: one TCP port
	masqMark     = 0x4000
	clusterCIDR  = "10.244.0.0/16"
	maxServices  = 30000
	maxEndpoints = 10
	// fakeEndpoints is how many distinct addresses fake endpoints take.
	fakeEndpoints = 247 * 256
)

// svcPort is one service port as kube-proxy names it: "ns/name:port".
type svcPort struct {
	name      string // "default/svc-00042:p7420-tcp"
	vip       net.IP
	proto     string // "tcp" or "udp"
	port      int
	endpoints []net.IP
}

// kubeServices lists the service ports of services=N with endpoints=M each:
// N-1 services with one TCP port whose endpoints are addresses no pod has
// (their rules are walked, never taken), then the measured service with a
// TCP and a UDP port whose one endpoint is the server pod.
func kubeServices(n, m int, server net.IP) []svcPort {
	var out []svcPort
	for i := 0; i < n; i++ {
		vip := serviceVIP(i)
		svc := fmt.Sprintf("default/svc-%05d", i)
		if i == n-1 {
			// The lab has one server: the measured service has it as its
			// only endpoint (endpoints=M shapes the other services).
			for _, proto := range []string{"tcp", "udp"} {
				out = append(out, svcPort{name: fmt.Sprintf("%s:p%d-%s", svc, servicePort, proto), vip: vip, proto: proto, port: servicePort, endpoints: []net.IP{server}})
			}
			break
		}
		eps := make([]net.IP, m)
		for j := range eps {
			// 10.244.3.0–10.244.249.255: inside the cluster CIDR, owned by
			// no pod (pods live in 10.244.1.0/24 and 10.244.2.0/24); they
			// repeat after 63,232 endpoints, which kube-proxy allows (two
			// services may share endpoint addresses).
			k := (i*m + j) % fakeEndpoints
			eps[j] = net.IPv4(10, 244, byte(3+k/256), byte(k%256)).To4()
		}
		out = append(out, svcPort{name: fmt.Sprintf("%s:p%d-tcp", svc, otherPort), vip: vip, proto: "tcp", port: otherPort, endpoints: eps})
	}
	return out
}

// chainHash is kube-proxy's portProtoHash/servicePortEndpointChainName:
// the first 16 characters of base32(sha256(s)).
func chainHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(h[:])[:16]
}

func svcChain(p svcPort) string { return "KUBE-SVC-" + chainHash(p.name+p.proto) }

func sepChain(p svcPort, ep net.IP) string {
	return "KUBE-SEP-" + chainHash(p.name+p.proto+fmt.Sprintf("%s:%d", ep, p.port))
}

// iptablesRules is the iptables-restore input kube-proxy's iptables mode
// writes for these service ports (nat and filter tables).
func iptablesRules(ports []svcPort) []byte {
	var b bytes.Buffer
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("*filter")
	for _, c := range []string{"KUBE-FORWARD", "KUBE-SERVICES", "KUBE-PROXY-FIREWALL"} {
		w(":%s - [0:0]", c)
	}
	w(`-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`)
	w(`-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`)
	w(`-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`)
	w(`-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`)
	w(`-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP`)
	w(`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x%x/0x%x -j ACCEPT`, masqMark, masqMark)
	w(`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`)
	w("COMMIT")
	w("*nat")
	for _, c := range []string{"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-NODEPORTS"} {
		w(":%s - [0:0]", c)
	}
	for _, p := range ports {
		w(":%s - [0:0]", svcChain(p))
		for _, ep := range p.endpoints {
			w(":%s - [0:0]", sepChain(p, ep))
		}
	}
	w(`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`)
	w(`-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`)
	w(`-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`)
	w(`-A KUBE-MARK-MASQ -j MARK --or-mark 0x%x`, masqMark)
	w(`-A KUBE-POSTROUTING -m mark ! --mark 0x%x/0x%x -j RETURN`, masqMark, masqMark)
	w(`-A KUBE-POSTROUTING -j MARK --xor-mark 0x%x`, masqMark)
	w(`-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`)
	for _, p := range ports {
		w(`-A KUBE-SERVICES -m comment --comment "%s cluster IP" -m %s -p %s -d %s/32 --dport %d -j %s`,
			p.name, p.proto, p.proto, p.vip, p.port, svcChain(p))
	}
	w(`-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`)
	for _, p := range ports {
		sc := svcChain(p)
		w(`-A %s -m comment --comment "%s cluster IP" -m %s -p %s -d %s/32 --dport %d ! -s %s -j KUBE-MARK-MASQ`,
			sc, p.name, p.proto, p.proto, p.vip, p.port, clusterCIDR)
		// Endpoint i of n is taken with probability 1/(n-i): uniform overall.
		for i, ep := range p.endpoints {
			left := len(p.endpoints) - i
			if left > 1 {
				w(`-A %s -m comment --comment "%s -> %s:%d" -m statistic --mode random --probability %.11f -j %s`,
					sc, p.name, ep, p.port, 1/float64(left), sepChain(p, ep))
			} else {
				w(`-A %s -m comment --comment "%s -> %s:%d" -j %s`, sc, p.name, ep, p.port, sepChain(p, ep))
			}
		}
		for _, ep := range p.endpoints {
			c := sepChain(p, ep)
			w(`-A %s -m comment --comment "%s" -s %s/32 -j KUBE-MARK-MASQ`, c, p.name, ep)
			w(`-A %s -m comment --comment "%s" -m %s -p %s -j DNAT --to-destination %s:%d`, c, p.name, p.proto, p.proto, ep, p.port)
		}
	}
	w("COMMIT")
	return b.Bytes()
}

// iptablesRestoreBin is the binary kube-proxy's iptables mode uses.
const iptablesRestoreBin = "iptables-restore"

// loadIPTables runs iptables-restore with rules inside ns (--noflush: the
// tables' other chains stay, as kube-proxy leaves other writers' rules).
func loadIPTables(ns string, rules []byte) error {
	path, err := exec.LookPath(iptablesRestoreBin)
	if err != nil {
		return fmt.Errorf("proxy=iptables: %w: %s not found on $PATH (install the Debian package iptables)", ErrNotSupported, iptablesRestoreBin)
	}
	cmd := exec.Command(path, "--noflush", "-w")
	cmd.Stdin = bytes.NewReader(rules)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := netns.Start(ns, cmd); err != nil {
		return fmt.Errorf("proxy=iptables: start %s in %s: %w", iptablesRestoreBin, nsLabel(ns), err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("proxy=iptables: %s in %s: %v: %s", iptablesRestoreBin, nsLabel(ns), err, strings.TrimSpace(firstLines(out.String(), 3)))
	}
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// nftables mode.

func nftSvcChain(p svcPort) string {
	ns, rest, _ := strings.Cut(p.name, "/")
	name, port, _ := strings.Cut(rest, ":")
	return fmt.Sprintf("service-%s-%s/%s/%s/%s", chainHash(p.name + p.proto)[:8], ns, name, p.proto, strings.SplitN(port, "-", 2)[0])
}

func nftEpChain(p svcPort, ep net.IP) string {
	ns, rest, _ := strings.Cut(p.name, "/")
	name, port, _ := strings.Cut(rest, ":")
	return fmt.Sprintf("endpoint-%s-%s/%s/%s/%s__%s/%d", chainHash(p.name + p.proto + ep.String())[:8], ns, name, p.proto,
		strings.SplitN(port, "-", 2)[0], ep, p.port)
}

// nftablesRuleCount is how many rules nftablesRules adds, for tests and logs.
func nftablesRuleCount(ports []svcPort) int {
	n := 5 // services, masquerading (3), mark-for-masquerade
	n += 3 // the base chains' jumps
	n++    // filter-forward: ct state invalid drop
	for _, p := range ports {
		n += 2 + 2*len(p.endpoints)
	}
	return n
}

// applyProxy programs kube-proxy's rules on every node: iptables-restore in
// iptables mode, one netlink batch in nftables mode.
func (b *builder) applyProxy(ctx context.Context) error {
	server, _ := b.lo.endpoints()
	m := max(1, b.s.Endpoints)
	ports := kubeServices(b.s.Services, m, server.ip)
	var rules int
	switch b.s.Proxy {
	case ProxyIPTables:
		rules = iptablesRuleCount(ports)
	case ProxyNFTables:
		rules = nftablesRuleCount(ports)
	}
	// Each node loads its own copy at once, as every node's kube-proxy
	// would; the kernel work of a large ruleset overlaps on two CPUs.
	err := each(ctx, b.lo.nodeNS, func(ns string) error {
		switch b.s.Proxy {
		case ProxyIPTables:
			return loadIPTables(ns, iptablesRules(ports))
		case ProxyNFTables:
			c, done, err := nftConn(ns, nftables.WithSockOptions(sndbufForce(nftBatchBytes(ports))))
			if err != nil {
				return err
			}
			defer done()
			if err := addNFTablesRules(c, ports); err != nil {
				return err
			}
			if err := c.Flush(); err != nil {
				return fmt.Errorf("proxy=nftables: table %s in %s: %w", kubeProxyTable, nsLabel(ns), err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.logf("proxy=%s: %d services (%d endpoints each), %d rules on each of %d nodes", b.s.Proxy, b.s.Services, m, rules, len(b.lo.nodeNS))
	return nil
}

// iptablesRuleCount is how many rules iptablesRules writes.
func iptablesRuleCount(ports []svcPort) int {
	n := 7 + 7 + 1 // filter rules; nat hooks and masquerade; the NodePorts rule
	for _, p := range ports {
		n += 2 + 3*len(p.endpoints)
	}
	return n
}
