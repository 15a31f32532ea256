package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/netns"
)

// The datapath agents' updates that pkg/disrupt fires at a running lab:
// kube-proxy's full resync and one endpoint change, and a policy set
// replaced. Each writes what the agent itself would write, in the form it
// would (iptables-restore input, one nftables netlink batch), on every node
// that holds the rules, and reports the CPU the writing cost.

// ErrNoRules is returned for an update of rules the lab does not have
// (a resync without proxy=, a policy replace without policies=).
var ErrNoRules = errors.New("the lab has no such rules")

// AgentWork is what one update cost: the CPU of the writer (the
// iptables-restore processes, or the threads that sent the netlink batch,
// whose kernel work is done in their sendmsg) summed over the nodes.
type AgentWork struct {
	CPU time.Duration
}

// NodeNetns lists the lab's node namespaces, node1 first.
func (l *Lab) NodeNetns() []string { return makeLayout(l.Spec, l.ID).nodeNS }

// DaemonNetns is the namespace of the lab's central daemons (an OVN
// preset's databases and ovn-northd); "" when it has none.
func (l *Lab) DaemonNetns() string {
	if lo := makeLayout(l.Spec, l.ID); len(lo.daemonNS) > 0 {
		return lo.daemonNS[0]
	}
	return ""
}

// proxyPorts regenerates the lab's Services as applyProxy wrote them.
func (l *Lab) proxyPorts() ([]svcPort, *layout, error) {
	if l.Spec == nil || l.Spec.Proxy == "" || l.Spec.Services < 1 {
		return nil, nil, fmt.Errorf("lab %s: kube-proxy update: %w (it needs --set proxy=… --set services=N)", l.Name, ErrNoRules)
	}
	lo := makeLayout(l.Spec, l.ID)
	server, _ := lo.endpoints()
	return kubeServices(l.Spec.Services, max(1, l.Spec.Endpoints), server.ip), lo, nil
}

// ProxyResync rewrites kube-proxy's whole ruleset on every node, as its
// full resync does: iptables mode restores every chain it owns (each
// declared chain is flushed and refilled in one iptables-restore);
// nftables mode flushes each of its chains and the service-ips map and
// refills them in one netlink transaction. The rules after are the rules
// before.
func (l *Lab) ProxyResync(ctx context.Context) (AgentWork, error) {
	ports, lo, err := l.proxyPorts()
	if err != nil {
		return AgentWork{}, err
	}
	return eachNode(ctx, lo.nodeNS, func(ns string) (time.Duration, error) {
		if l.Spec.Proxy == ProxyIPTables {
			return restoreIPTables(ns, iptablesResync(ports))
		}
		// Twice the load's buffer: every chain's flush is one more message
		// the kernel acknowledges (ENOBUFS at 10,000 Services otherwise).
		return nftBatch(ns, 2*nftBatchBytes(ports), func(c *nftables.Conn) error {
			t := &nftables.Table{Name: kubeProxyTable, Family: nftables.TableFamilyIPv4}
			for _, name := range nftChainNames(ports) {
				c.FlushChain(&nftables.Chain{Name: name, Table: t})
			}
			c.FlushSet(&nftables.Set{Table: t, Name: "service-ips"})
			return addNFTablesRules(c, ports)
		})
	})
}

// ProxySetEndpoint moves the endpoint of Service svc (0-based, one of the
// services=N the probe does not dial: 0 ≤ svc < N-1) from its generated
// address to ep, or back when ep is nil, on every node — the update
// kube-proxy makes for one changed EndpointSlice. iptables mode writes
// what kube-proxy's partial sync writes (the KUBE-SERVICES chain in full,
// the changed service chain, the new endpoint chain, the old one deleted);
// nftables mode adds the new endpoint chain, refills the service chain and
// deletes the old endpoint chain in one transaction.
func (l *Lab) ProxySetEndpoint(ctx context.Context, svc int, ep net.IP) (AgentWork, error) {
	ports, lo, err := l.proxyPorts()
	if err != nil {
		return AgentWork{}, err
	}
	if svc < 0 || svc >= len(ports)-2 || l.Spec.Services < 2 {
		return AgentWork{}, fmt.Errorf("lab %s: endpoint change of service %d: %w (want 0 to %d; the last Service is the probed one)", l.Name, svc, ErrInvalid, l.Spec.Services-2)
	}
	from, to := ports[svc], ports[svc]
	to.endpoints = []net.IP{ep.To4()}
	if ep == nil {
		// Back to the generated endpoint: the change reversed.
		from.endpoints = []net.IP{ChangedEndpoint(svc)}
		to = ports[svc]
	}
	if len(ports[svc].endpoints) != 1 {
		return AgentWork{}, fmt.Errorf("lab %s: endpoint change: %w (it needs endpoints=1)", l.Name, ErrInvalid)
	}
	after := append([]svcPort(nil), ports...)
	after[svc] = to
	return eachNode(ctx, lo.nodeNS, func(ns string) (time.Duration, error) {
		if l.Spec.Proxy == ProxyIPTables {
			return restoreIPTables(ns, iptablesEndpointChange(after, from, to))
		}
		return nftBatch(ns, 1<<20, func(c *nftables.Conn) error {
			t := &nftables.Table{Name: kubeProxyTable, Family: nftables.TableFamilyIPv4}
			mark := &nftables.Chain{Name: "mark-for-masquerade", Table: t}
			addNFTService(c, t, mark, to, true)
			c.DelChain(&nftables.Chain{Name: nftEpChain(from, from.endpoints[0]), Table: t})
			return nil
		})
	})
}

// ChangedEndpoint is the address ProxySetEndpoint's callers move a
// Service's endpoint to: inside the cluster CIDR, owned by no pod and by
// no generated endpoint (10.244.250.x).
func ChangedEndpoint(svc int) net.IP {
	return net.IPv4(10, 244, 250, byte(1+svc%250)).To4()
}

// PolicyReplace replaces the server pod's policy set (policies=N) in one
// nftables transaction, as a policy agent's resync does: the ingress
// chain flushed and refilled (linear), or the allowed set flushed and
// refilled (set), with the same peers.
func (l *Lab) PolicyReplace(ctx context.Context) (AgentWork, error) {
	if l.Spec == nil || l.Spec.Policies < 1 {
		return AgentWork{}, fmt.Errorf("lab %s: policy replace: %w (it needs --set policies=N)", l.Name, ErrNoRules)
	}
	lo := makeLayout(l.Spec, l.ID)
	server, client := lo.endpoints()
	ns := lo.nodeNS[server.node-1]
	mode := l.Spec.PolicyMode
	if mode == "" {
		mode = PolicyLinear
	}
	cpu, err := nftBatch(ns, 1<<20+512*l.Spec.Policies, func(c *nftables.Conn) error {
		t := &nftables.Table{Name: policyTable(l.ID), Family: nftables.TableFamilyIPv4}
		c.FlushChain(&nftables.Chain{Name: "forward", Table: t})
		c.FlushChain(&nftables.Chain{Name: "pod-ingress", Table: t})
		if mode == PolicySet {
			c.FlushSet(&nftables.Set{Table: t, Name: "allowed"})
		}
		return addPolicyRules(c, policyTable(l.ID), mode, server.ip, policyPeers(l.Spec.Policies, client.ip))
	})
	return AgentWork{CPU: cpu}, err
}

// nftChainNames lists every chain addNFTablesRules makes for ports.
func nftChainNames(ports []svcPort) []string {
	out := []string{"mark-for-masquerade", "masquerading", "services", "nat-prerouting", "nat-output", "nat-postrouting", "filter-forward"}
	for _, p := range ports {
		out = append(out, nftSvcChain(p))
		for _, ep := range p.endpoints {
			out = append(out, nftEpChain(p, ep))
		}
	}
	return out
}

// iptablesEndpointChange is the iptables-restore input of kube-proxy's
// partial sync after one Service's endpoint changed: KUBE-SERVICES in full
// (declared, so flushed and rewritten), the changed service chain, the new
// endpoint chain, and the old endpoint chain deleted.
func iptablesEndpointChange(after []svcPort, from, to svcPort) []byte {
	full := string(iptablesRules(after))
	_, nat, _ := strings.Cut(full, "*nat\n")
	keep := func(line string) bool {
		return strings.HasPrefix(line, ":KUBE-SERVICES ") ||
			strings.HasPrefix(line, "-A KUBE-SERVICES ") ||
			strings.HasPrefix(line, ":"+svcChain(to)+" ") || strings.HasPrefix(line, "-A "+svcChain(to)+" ") ||
			strings.HasPrefix(line, ":"+sepChain(to, to.endpoints[0])+" ") || strings.HasPrefix(line, "-A "+sepChain(to, to.endpoints[0])+" ")
	}
	var b bytes.Buffer
	b.WriteString("*nat\n")
	for _, line := range strings.Split(nat, "\n") {
		if keep(line) {
			b.WriteString(line + "\n")
		}
	}
	// A chain is deleted empty: declared (so flushed) first, as
	// kube-proxy writes its stale chains.
	old := sepChain(from, from.endpoints[0])
	fmt.Fprintf(&b, ":%s - [0:0]\n-X %s\nCOMMIT\n", old, old)
	return b.Bytes()
}

// iptablesResync is the iptables-restore input of kube-proxy's full
// resync: every chain it owns declared (flushed) and refilled. The jumps
// into them from the built-in chains are left out: kube-proxy checks those
// apart (iptables -C) and adds them only when missing, and with --noflush
// they would be appended again.
func iptablesResync(ports []svcPort) []byte {
	var b bytes.Buffer
	for _, line := range strings.SplitAfter(string(iptablesRules(ports)), "\n") {
		switch {
		case strings.HasPrefix(line, "-A FORWARD "), strings.HasPrefix(line, "-A OUTPUT "),
			strings.HasPrefix(line, "-A PREROUTING "), strings.HasPrefix(line, "-A POSTROUTING "),
			strings.HasPrefix(line, "-A INPUT "):
			continue
		}
		b.WriteString(line)
	}
	return b.Bytes()
}

// restoreIPTables is loadIPTables that also returns the CPU the
// iptables-restore process spent (user and system).
func restoreIPTables(ns string, rules []byte) (time.Duration, error) {
	path, err := exec.LookPath(iptablesRestoreBin)
	if err != nil {
		return 0, fmt.Errorf("proxy=iptables: %w: %s not found on $PATH", ErrNotSupported, iptablesRestoreBin)
	}
	cmd := exec.Command(path, "--noflush", "-w")
	cmd.Stdin = bytes.NewReader(rules)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := netns.Start(ns, cmd); err != nil {
		return 0, fmt.Errorf("proxy=iptables: start %s in %s: %w", iptablesRestoreBin, nsLabel(ns), err)
	}
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("proxy=iptables: %s in %s: %v: %s", iptablesRestoreBin, nsLabel(ns), err, strings.TrimSpace(firstLines(out.String(), 3)))
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// nftBatch builds one batch with fill and sends it from a thread of its
// own, whose CPU (user and system: the kernel applies the batch inside
// that thread's sendmsg) is returned.
func nftBatch(ns string, bytes int, fill func(*nftables.Conn) error) (time.Duration, error) {
	var cpu time.Duration
	errc := make(chan error, 1)
	go func() {
		// The thread is not reused after: its CPU is this batch's alone.
		runtime.LockOSThread()
		before := threadCPU()
		c, done, err := nftConn(ns, nftables.WithSockOptions(sndbufForce(bytes)))
		if err != nil {
			errc <- err
			return
		}
		defer done()
		if err := fill(c); err != nil {
			errc <- err
			return
		}
		if err := c.Flush(); err != nil {
			errc <- fmt.Errorf("nftables batch in %s: %w", nsLabel(ns), err)
			return
		}
		cpu = threadCPU() - before
		errc <- nil
	}()
	err := <-errc
	return cpu, err
}

func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// eachNode runs fn on every node at once, as every node's agent would
// apply the same update, and sums their CPU.
func eachNode(ctx context.Context, nodes []string, fn func(ns string) (time.Duration, error)) (AgentWork, error) {
	var mu sync.Mutex
	var w AgentWork
	err := each(ctx, nodes, func(ns string) error {
		cpu, err := fn(ns)
		mu.Lock()
		w.CPU += cpu
		mu.Unlock()
		return err
	})
	return w, err
}

// addNFTService queues one service port's chains: its endpoint chains and
// the service chain (masquerade mark for outside sources, then the
// endpoint choice). With flush, the service chain is flushed first, so an
// existing service is rewritten in place.
func addNFTService(c *nftables.Conn, t *nftables.Table, mark *nftables.Chain, p svcPort, flush bool) {
	sc := c.AddChain(&nftables.Chain{Name: nftSvcChain(p), Table: t})
	if flush {
		c.FlushChain(sc)
	}
	writeNFTService(c, t, mark, sc, p)
}
