package lab

import (
	"bytes"
	"net"
	"regexp"
	"strings"
	"testing"
)

var testServer = net.IPv4(10, 244, 2, 10).To4()

// The iptables-mode rules have kube-proxy's shape: one KUBE-SERVICES rule
// per service port, in order, the measured service last (TCP and UDP), a
// KUBE-SVC chain per service port and a KUBE-SEP chain per endpoint with
// the statistic probabilities that make the choice uniform.
func TestIPTablesRulesShape(t *testing.T) {
	ports := kubeServices(100, 3, testServer)
	in := string(iptablesRules(ports))
	count := func(re string) int { return len(regexp.MustCompile(re).FindAllString(in, -1)) }
	if n := len(ports); n != 101 { // 99 one-port services + the measured one's TCP and UDP
		t.Fatalf("%d service ports, want 101", n)
	}
	if got := count(`(?m)^-A KUBE-SERVICES .* -j KUBE-SVC-`); got != 101 {
		t.Errorf("KUBE-SERVICES service rules: %d, want 101", got)
	}
	// 99 services × 3 endpoints, and the server behind the measured one.
	if got := count(`(?m)^:KUBE-SEP-`); got != 99*3+2 {
		t.Errorf("KUBE-SEP chains: %d, want %d", got, 99*3+2)
	}
	if got := count(`(?m)^-A KUBE-SEP-\S+ .* -j DNAT --to-destination`); got != 99*3+2 {
		t.Errorf("DNAT rules: %d, want %d", got, 99*3+2)
	}
	if got := count(`--probability 0\.33333333333`); got != 99 {
		t.Errorf("first endpoints at 1/3: %d, want 99", got)
	}
	if got := count(`--probability 0\.50000000000`); got != 99 {
		t.Errorf("second endpoints at 1/2: %d, want 99", got)
	}
	// Order: the measured service's two ports are the last service rules,
	// then only the NodePorts rule.
	var svcRules []string
	for _, l := range strings.Split(in, "\n") {
		if strings.HasPrefix(l, "-A KUBE-SERVICES ") {
			svcRules = append(svcRules, l)
		}
	}
	last := svcRules[len(svcRules)-3:]
	vip := serviceVIP(99).String()
	if !strings.Contains(last[0], "-p tcp -d "+vip+"/32 --dport 7420") || !strings.Contains(last[1], "-p udp -d "+vip+"/32 --dport 7420") ||
		!strings.Contains(last[2], "KUBE-NODEPORTS") {
		t.Errorf("the measured service is not last:\n%s", strings.Join(last, "\n"))
	}
	// Every DNAT of the measured service goes to the server.
	for _, l := range strings.Split(in, "\n") {
		if strings.Contains(l, "svc-00099") && strings.Contains(l, "DNAT") && !strings.Contains(l, testServer.String()+":7420") {
			t.Errorf("measured service DNATs elsewhere: %s", l)
		}
	}
	// kube-proxy's chain names: KUBE-SVC- plus 16 base32 characters.
	if got := count(`(?m)^:KUBE-SVC-[A-Z2-7]{16} - \[0:0\]$`); got != 101 {
		t.Errorf("KUBE-SVC chain declarations: %d, want 101", got)
	}
	for _, want := range []string{"*nat\n", "*filter\n", "COMMIT\n", "-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000", "MASQUERADE --random-fully"} {
		if !strings.Contains(in, want) {
			t.Errorf("missing %q", want)
		}
	}
	// Deterministic: the same input gives the same bytes.
	if !bytes.Equal(iptablesRules(ports), iptablesRules(kubeServices(100, 3, testServer))) {
		t.Error("rules differ between two generations")
	}
}

// Fake endpoints stay inside the cluster CIDR, away from the pods'
// 10.244.1.0/24 and 10.244.2.0/24, and distinct until they must repeat.
func TestKubeServicesEndpoints(t *testing.T) {
	ports := kubeServices(maxServices, maxEndpoints, testServer)
	seen := map[string]bool{}
	_, cluster, _ := net.ParseCIDR(clusterCIDR)
	n := 0
	for _, p := range ports[:len(ports)-2] {
		for _, ep := range p.endpoints {
			if !cluster.Contains(ep) || ep[2] < 3 || ep[2] > 249 {
				t.Fatalf("endpoint %s of %s outside 10.244.3.0–10.244.249.255", ep, p.name)
			}
			if n < fakeEndpoints && seen[ep.String()] {
				t.Fatalf("endpoint %s twice among the first %d", ep, fakeEndpoints)
			}
			seen[ep.String()] = true
			n++
		}
	}
	if len(seen) != fakeEndpoints {
		t.Errorf("%d distinct fake endpoints, want %d", len(seen), fakeEndpoints)
	}
	if last := ports[len(ports)-1]; !last.vip.Equal(serviceVIP(maxServices-1)) || last.proto != "udp" {
		t.Errorf("last port %+v", last)
	}
}

// The knobs are refused where they cannot run: proxy without services,
// proxy on a preset without routing nodes, endpoints without proxy.
func TestProxyKnobValidation(t *testing.T) {
	for _, tc := range []struct {
		topo string
		kv   map[string]string
		want string
	}{
		{"native", map[string]string{"proxy": "iptables"}, "knob proxy: needs services=N"},
		{"veth", map[string]string{"proxy": "nftables"}, "knob proxy: kube-proxy's rules go in node namespaces"},
		{"native", map[string]string{"services": "10", "endpoints": "2"}, "knob endpoints: only with proxy"},
		{"native", map[string]string{"proxy": "ipvs"}, `knob proxy: bad value "ipvs"`},
		{"native", map[string]string{"services": "30001"}, `knob services: bad value "30001"`},
		{"native", map[string]string{"proxy": "nftables", "services": "30000", "endpoints": "10"}, ""},
	} {
		_, err := Resolve(tc.topo, "", tc.kv)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %v: %v", tc.topo, tc.kv, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %v: error %v, want %q", tc.topo, tc.kv, err, tc.want)
		}
	}
}

// The rule counts the lab logs match what the generators write.
func TestProxyRuleCounts(t *testing.T) {
	ports := kubeServices(50, 2, testServer)
	if got, want := bytes.Count(iptablesRules(ports), []byte("\n-A ")), iptablesRuleCount(ports); got != want {
		t.Errorf("iptables: %d rules written, %d counted", got, want)
	}
}

// policies=N: the client is the last allowed peer; the knobs are refused
// where they cannot run.
func TestPolicyPeersAndKnobs(t *testing.T) {
	client := net.IPv4(10, 244, 1, 10).To4()
	p := policyPeers(10000, client)
	if len(p) != 10000 || !p[len(p)-1].Equal(client) {
		t.Fatalf("%d peers, last %v", len(p), p[len(p)-1])
	}
	for _, ip := range p[:len(p)-1] {
		if ip.Equal(client) {
			t.Fatal("the client appears before the last rule")
		}
	}
	if _, err := Resolve("veth", "", map[string]string{"policies": "10"}); err == nil {
		t.Error("policies on veth accepted")
	}
	s, _ := Preset("native")
	if err := s.setKnob("policy_mode", "set"); err != nil {
		t.Fatal(err)
	}
	if err := s.finish(); err == nil {
		t.Error("policy_mode without policies accepted")
	}
	if err := s.setKnob("policies", "10001"); err == nil {
		t.Error("policies=10001 accepted")
	}
}
