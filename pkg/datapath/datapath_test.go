package datapath

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The fixtures under testdata/ were captured on k8slab with real Cilium
// 1.20.2 in five modes, Flannel v0.28.10 (vxlan) and the bridge plugin
// (testdata/README.md says how).

// nodeInfo is the part of a captured `cnibench k8s node-info` line the
// readers take.
func nodeInfo(t *testing.T, mode string) (links, agents []string) {
	t.Helper()
	var ni struct {
		Links  []string `json:"links"`
		Agents []string `json:"agents"`
	}
	b, err := os.ReadFile(filepath.Join("testdata", mode, "node-info.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ni); err != nil {
		t.Fatal(err)
	}
	return ni.Links, ni.Agents
}

func read(t *testing.T, mode, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", mode, file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ciliumModes are the captured modes and what the agent was started with
// (addons/cilium/setup.sh's knobs), as Cilium's own status reports them.
var ciliumModes = []struct {
	dir                          string
	routing, tunnel, hostRouting string
	kpr, socketLB                bool
	masquerade                   string
	summary                      string
}{
	{"native-kp", "native", "", "legacy", false, false, "iptables",
		"cilium ?: native routing, kube-proxy not replaced, host routing legacy, masquerade iptables, tcx/veth"},
	{"vxlan-kp", "tunnel", "vxlan", "legacy", false, false, "iptables",
		"cilium ?: tunnel vxlan, kube-proxy not replaced, host routing legacy, masquerade iptables, tcx/veth"},
	{"native-kpr-kp", "native", "", "legacy", true, true, "iptables",
		"cilium ?: native routing, kube-proxy replaced (socket LB), host routing legacy, masquerade iptables, tcx/veth"},
	{"vxlan-kpr-nokp", "tunnel", "vxlan", "legacy", true, true, "iptables",
		"cilium 1.20.2: tunnel vxlan, kube-proxy replaced (socket LB), host routing legacy, masquerade iptables, tcx/veth"},
	{"native-kpr-bpfhost-nokp", "native", "", "bpf", true, true, "bpf",
		"cilium ?: native routing, kube-proxy replaced (socket LB), host routing bpf, masquerade bpf, tcx/veth"},
}

func TestParseCiliumAPICaptured(t *testing.T) {
	for _, m := range ciliumModes {
		t.Run(m.dir, func(t *testing.T) {
			var debuginfo []byte
			if _, err := os.Stat(filepath.Join("testdata", m.dir, "debuginfo.json")); err == nil {
				debuginfo = read(t, m.dir, "debuginfo.json")
			}
			c, err := ParseCiliumAPI(read(t, m.dir, "healthz.json"), debuginfo)
			if err != nil {
				t.Fatal(err)
			}
			if c.Routing != m.routing || c.Tunnel != m.tunnel || c.HostRouting != m.hostRouting || c.Masquerade != m.masquerade {
				t.Errorf("routing %q tunnel %q host routing %q masquerade %q; want %q %q %q %q",
					c.Routing, c.Tunnel, c.HostRouting, c.Masquerade, m.routing, m.tunnel, m.hostRouting, m.masquerade)
			}
			if c.KubeProxyReplacement == nil || *c.KubeProxyReplacement != m.kpr || c.SocketLB == nil || *c.SocketLB != m.socketLB {
				t.Errorf("KPR %v socket LB %v; want %v %v", c.KubeProxyReplacement, c.SocketLB, m.kpr, m.socketLB)
			}
			// The addon's build leaves healthz's version message empty
			// (" (v-)"): only debuginfo names 1.20.2.
			if got := c.Summary(); got != m.summary {
				t.Errorf("Summary\n got %q\nwant %q", got, m.summary)
			}
		})
	}
}

func TestParseCiliumAPIVersionFromHealthz(t *testing.T) {
	c, err := ParseCiliumAPI([]byte(`{"cilium":{"state":"Ok","msg":"1.16.5 (v1.16.5-ad688277)"},"routing":{"inter-host-routing-mode":"Tunnel","tunnel-protocol":"geneve","intra-host-routing-mode":"BPF"}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != "1.16.5" || c.Mode() != "geneve" || c.HostRouting != "bpf" {
		t.Errorf("got %+v", c)
	}
}

func TestParseCiliumAPIRefusesWhatIsNotStatus(t *testing.T) {
	for _, in := range []string{`not json`, `{}`, `{"items": []}`} {
		if _, err := ParseCiliumAPI([]byte(in), nil); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", in, err)
		}
	}
	if _, err := ParseCiliumAPI(read(t, "native-kp", "healthz.json"), []byte("<html>")); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad debuginfo: err %v, want ErrMalformed", err)
	}
}

// TestCiliumFromNodeCaptured: without privilege the node's devices and the
// agent's flags give the routing, the replacement and masquerading, never a
// version or (with the default automatic choice) the host routing.
func TestCiliumFromNodeCaptured(t *testing.T) {
	for _, m := range ciliumModes {
		t.Run(m.dir, func(t *testing.T) {
			links, _ := nodeInfo(t, m.dir)
			c := CiliumFromNode(ParseCmdline(read(t, m.dir, "cilium-agent.cmdline")), links)
			if c.Routing != m.routing || c.Tunnel != m.tunnel || c.Masquerade != m.masquerade {
				t.Errorf("routing %q tunnel %q masquerade %q; want %q %q %q", c.Routing, c.Tunnel, c.Masquerade, m.routing, m.tunnel, m.masquerade)
			}
			if c.KubeProxyReplacement == nil || *c.KubeProxyReplacement != m.kpr || c.SocketLB == nil || *c.SocketLB != m.socketLB {
				t.Errorf("KPR %v socket LB %v; want %v %v", c.KubeProxyReplacement, c.SocketLB, m.kpr, m.socketLB)
			}
			if c.Version != "" || c.HostRouting != "" {
				t.Errorf("version %q host routing %q from flags; neither is in them", c.Version, c.HostRouting)
			}
		})
	}
	// An install configured through --config-dir: the devices still tell
	// the tunnel; the flags nothing.
	c := CiliumFromNode([]string{"cilium-agent", "--config-dir=/tmp/cilium/config-map"}, []string{"cilium_host:veth", "cilium_geneve:geneve"})
	if c.Mode() != "geneve" || c.KubeProxyReplacement != nil || c.Masquerade != "" {
		t.Errorf("config-dir install: %+v", c)
	}
	if c := CiliumFromNode(nil, []string{"eth0:veth"}); c.Routing != "" {
		t.Errorf("no cilium_host (agent not up): routing %q, want unknown", c.Routing)
	}
}

func agentsOf(names []string) map[int]string {
	m := map[int]string{}
	for i, n := range names {
		m[100+i] = n
	}
	return m
}

func pidOf(agents map[int]string, name string) int {
	for pid, n := range agents {
		if n == name {
			return pid
		}
	}
	return 0
}

func TestRecognizeCaptured(t *testing.T) {
	cases := []struct {
		dir, cmdline, agent string
		cni, mode, summary  string
		missing             []string
	}{
		{"vxlan-kpr-nokp", "cilium-agent.cmdline", "cilium-agent", "cilium", "vxlan",
			"cilium ?: tunnel vxlan, kube-proxy replaced (socket LB), masquerade iptables", []string{"host_routing", "version"}},
		{"native-kp", "cilium-agent.cmdline", "cilium-agent", "cilium", "native",
			"cilium ?: native routing, kube-proxy not replaced, masquerade iptables", []string{"host_routing", "version"}},
		{"flannel-vxlan", "flanneld.cmdline", "flanneld", "flannel", "vxlan", "flannel vxlan", nil},
		{"bridge", "", "", "bridge", "", "bridge", nil},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			links, names := nodeInfo(t, c.dir)
			agents := agentsOf(names)
			s := Seen{Links: links, Agents: agents, Args: map[int][]string{}}
			if c.cmdline != "" {
				s.Args[pidOf(agents, c.agent)] = ParseCmdline(read(t, c.dir, c.cmdline))
			}
			n := Recognize(s)
			if n.CNI != c.cni || n.Mode != c.mode || n.Summary() != c.summary {
				t.Errorf("got %q %q %q; want %q %q %q", n.CNI, n.Mode, n.Summary(), c.cni, c.mode, c.summary)
			}
			if got := strings.Join(slices.Sorted(maps.Keys(n.Missing)), ","); got != strings.Join(c.missing, ",") {
				t.Errorf("missing %v (%v), want %v", got, n.Missing, c.missing)
			}
		})
	}
	if n := Recognize(Seen{Links: []string{"eth0:veth"}, Agents: map[int]string{1: "kube-proxy"}}); n.CNI != "" || n.Summary() != "unknown" {
		t.Errorf("nothing known: %+v", n)
	}
}

func TestFlannelFilesCaptured(t *testing.T) {
	f, err := ParseFlannelNetConf(read(t, "flannel-vxlan", "net-conf.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ParseFlannelSubnetEnv(read(t, "flannel-vxlan", "subnet.env"), &f); err != nil {
		t.Fatal(err)
	}
	want := Flannel{Backend: "vxlan", Network: "10.244.0.0/16", Subnet: "10.244.0.1/24", MTU: 1450, IPMasq: "false"}
	if f != want {
		t.Errorf("got %+v, want %+v", f, want)
	}
	if _, err := ParseFlannelNetConf([]byte("{")); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad net-conf: %v", err)
	}
	if err := ParseFlannelSubnetEnv([]byte("FLANNEL_MTU=big\n"), &f); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad MTU: %v", err)
	}
	if err := ParseFlannelSubnetEnv([]byte("just words\n"), &f); !errors.Is(err, ErrMalformed) {
		t.Errorf("no =: %v", err)
	}
}

func TestFlagValue(t *testing.T) {
	args := []string{"agent", "--a=1", "-b", "2", "--c", "--d=x", "--d=y", "pos"}
	for k, want := range map[string]string{"a": "1", "b": "2", "c": "true", "d": "y", "e": "", "pos": ""} {
		if got := FlagValue(args, k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
}

// fakeAgent serves captured answers on a unix socket under root, at the
// agent's own path, as /proc/<pid>/root shows it.
func fakeAgent(t *testing.T, root, mode string, debuginfo bool) {
	t.Helper()
	sock := filepath.Join(root, CiliumSocket)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("unix socket at %s: %v", sock, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write(read(t, mode, "healthz.json")) })
	mux.HandleFunc("/v1/debuginfo", func(w http.ResponseWriter, _ *http.Request) {
		if !debuginfo {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		w.Write(read(t, mode, "debuginfo.json"))
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// TestLookAsksTheAgent: with deep set, Look reaches the agent's API through
// /proc/<pid>/root and Recognize takes its answer over the flags; without,
// only the command line is read.
func TestLookAsksTheAgent(t *testing.T) {
	proc := t.TempDir()
	const pid = 4242
	dir := filepath.Join(proc, "4242")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), read(t, "vxlan-kpr-nokp", "cilium-agent.cmdline"), 0o644); err != nil {
		t.Fatal(err)
	}
	fakeAgent(t, filepath.Join(dir, "root"), "vxlan-kpr-nokp", true)
	links, _ := nodeInfo(t, "vxlan-kpr-nokp")
	agents := map[int]string{pid: "cilium-agent"}

	n := Recognize(Look(context.Background(), proc, links, agents, true))
	want := "cilium 1.20.2: tunnel vxlan, kube-proxy replaced (socket LB), host routing legacy, masquerade iptables, tcx/veth"
	if n.Summary() != want || n.Version != "1.20.2" || len(n.Missing) != 0 || !strings.Contains(n.From, "API") {
		t.Errorf("deep: %q version %q missing %v from %q", n.Summary(), n.Version, n.Missing, n.From)
	}
	n = Recognize(Look(context.Background(), proc, links, agents, false))
	if n.Version != "" || n.Missing["version"] == "" || !strings.Contains(n.From, "flags") {
		t.Errorf("shallow: version %q missing %v from %q", n.Version, n.Missing, n.From)
	}
	// An agent whose socket is not there: the reason replaces the advice.
	other := map[int]string{4243: "cilium-agent"}
	n = Recognize(Look(context.Background(), proc, links, other, true))
	if !strings.Contains(n.Missing["version"], "cilium-agent API at") {
		t.Errorf("no socket: missing %v", n.Missing)
	}
}

// TestLookReadsFlannelsFiles: deep, flanneld's net-conf and subnet file are
// read where its flags put them (k8slab's own paths), through its root.
func TestLookReadsFlannelsFiles(t *testing.T) {
	proc := t.TempDir()
	root := filepath.Join(proc, "77", "root")
	for path, fixture := range map[string]string{
		"/var/lib/k8slab/flannel-net-conf.json":    "net-conf.json",
		"/run/k8slab/k8slab-n1/flannel-subnet.env": "subnet.env",
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, read(t, "flannel-vxlan", fixture), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(proc, "77", "cmdline"), read(t, "flannel-vxlan", "flanneld.cmdline"), 0o644); err != nil {
		t.Fatal(err)
	}
	// No flannel.1 in these links: the backend must come from the net-conf.
	n := Recognize(Look(context.Background(), proc, []string{"cni0:bridge", "eth0:veth"}, map[int]string{77: "flanneld"}, true))
	want := Flannel{Backend: "vxlan", Network: "10.244.0.0/16", Subnet: "10.244.0.1/24", MTU: 1450, IPMasq: "false", Iface: "eth0"}
	if n.Flannel == nil || *n.Flannel != want || n.Summary() != "flannel vxlan" || !strings.Contains(n.From, "net-conf") {
		t.Errorf("got %+v (%q from %q), want %+v", n.Flannel, n.Summary(), n.From, want)
	}
}
