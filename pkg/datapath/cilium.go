package datapath

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Cilium is how a Cilium agent runs its node's datapath.
type Cilium struct {
	Version string `json:"version,omitempty"`
	// Routing between nodes: native or tunnel.
	Routing string `json:"routing,omitempty"`
	// Tunnel is the tunnel protocol (vxlan, geneve) in tunnel routing.
	Tunnel string `json:"tunnel,omitempty"`
	// KubeProxyReplacement: Cilium serves Services itself (nil = unknown).
	KubeProxyReplacement *bool `json:"kube_proxy_replacement,omitempty"`
	// SocketLB: Services are translated at connect() by cgroup programs.
	SocketLB *bool `json:"socket_lb,omitempty"`
	// HostRouting is legacy (the node's IP stack and netfilter forward
	// pod traffic) or bpf (redirected by BPF past them); "" = unknown.
	HostRouting string `json:"host_routing,omitempty"`
	// Masquerade is iptables, bpf or off; "" = unknown.
	Masquerade string `json:"masquerade,omitempty"`
	// AttachMode is how programs attach (tcx, tc), DatapathMode the pod
	// device (veth, netkit).
	AttachMode   string `json:"attach_mode,omitempty"`
	DatapathMode string `json:"datapath_mode,omitempty"`
}

// Mode is the routing between nodes in one word: the tunnel protocol, or
// native.
func (c Cilium) Mode() string {
	switch c.Routing {
	case "tunnel":
		if c.Tunnel != "" {
			return c.Tunnel
		}
		return "tunnel"
	case "native":
		return "native"
	}
	return ""
}

// Summary: "cilium 1.20.2: tunnel vxlan, kube-proxy replaced (socket LB),
// host routing legacy, masquerade iptables, tcx/veth"; unknown facts are
// left out, an unknown version is "?".
func (c Cilium) Summary() string {
	v := c.Version
	if v == "" {
		v = "?"
	}
	var parts []string
	switch c.Routing {
	case "tunnel":
		parts = append(parts, strings.TrimSpace("tunnel "+c.Tunnel))
	case "native":
		parts = append(parts, "native routing")
	}
	if k := c.KubeProxyReplacement; k != nil {
		s := "kube-proxy not replaced"
		if *k {
			s = "kube-proxy replaced"
			if c.SocketLB != nil && *c.SocketLB {
				s += " (socket LB)"
			}
		}
		parts = append(parts, s)
	}
	if c.HostRouting != "" {
		parts = append(parts, "host routing "+c.HostRouting)
	}
	if c.Masquerade != "" {
		parts = append(parts, "masquerade "+c.Masquerade)
	}
	if c.AttachMode != "" || c.DatapathMode != "" {
		parts = append(parts, strings.Trim(c.AttachMode+"/"+c.DatapathMode, "/"))
	}
	return "cilium " + v + ": " + strings.Join(parts, ", ")
}

// ciliumStatus holds the fields of the agent's GET /v1/healthz
// (models.StatusResponse, also what `cilium-dbg status -o json` prints)
// that describe the datapath.
type ciliumStatus struct {
	Cilium *struct {
		Msg string `json:"msg"` // "1.20.2 (v1.20.2-<rev>)"; " (v-)" in a build without revision
	} `json:"cilium"`
	Routing *struct {
		InterHost string `json:"inter-host-routing-mode"` // Native | Tunnel
		IntraHost string `json:"intra-host-routing-mode"` // BPF | Legacy
		Tunnel    string `json:"tunnel-protocol"`
	} `json:"routing"`
	KPR *struct {
		Mode     string `json:"mode"` // True | False (before 1.14: Strict | Partial | Disabled)
		Features struct {
			SocketLB struct {
				Enabled bool `json:"enabled"`
			} `json:"socketLB"`
		} `json:"features"`
	} `json:"kube-proxy-replacement"`
	Masquerading *struct {
		Enabled bool   `json:"enabled"`
		Mode    string `json:"mode"` // BPF | iptables
	} `json:"masquerading"`
	AttachMode   string `json:"attach-mode"`
	DatapathMode string `json:"datapath-mode"`
}

// ParseCiliumAPI reads the agent's answers to GET /v1/healthz and, when
// non-nil, GET /v1/debuginfo (whose "cilium-version" names the version
// also when the build left healthz's version message empty).
func ParseCiliumAPI(healthz, debuginfo []byte) (Cilium, error) {
	var st ciliumStatus
	if err := json.Unmarshal(healthz, &st); err != nil {
		return Cilium{}, fmt.Errorf("%w: cilium-agent /v1/healthz: %v", ErrMalformed, err)
	}
	if st.Routing == nil && st.KPR == nil && st.Cilium == nil {
		return Cilium{}, fmt.Errorf("%w: cilium-agent /v1/healthz: no cilium, routing or kube-proxy-replacement field", ErrMalformed)
	}
	var c Cilium
	if st.Cilium != nil {
		if f := strings.Fields(st.Cilium.Msg); len(f) > 0 && !strings.HasPrefix(f[0], "(") {
			c.Version = f[0]
		}
	}
	if debuginfo != nil {
		var d struct {
			Version string `json:"cilium-version"` // "1.20.2 go version go1.26.8 linux/amd64"
		}
		if err := json.Unmarshal(debuginfo, &d); err != nil {
			return Cilium{}, fmt.Errorf("%w: cilium-agent /v1/debuginfo: %v", ErrMalformed, err)
		}
		if f := strings.Fields(d.Version); len(f) > 0 {
			c.Version = f[0]
		}
	}
	if r := st.Routing; r != nil {
		c.Routing = strings.ToLower(r.InterHost)
		if c.Routing == "tunnel" {
			c.Tunnel = strings.ToLower(r.Tunnel)
		}
		c.HostRouting = strings.ToLower(r.IntraHost)
	}
	if k := st.KPR; k != nil {
		c.KubeProxyReplacement = kprValue(k.Mode)
		sl := k.Features.SocketLB.Enabled
		c.SocketLB = &sl
	}
	if m := st.Masquerading; m != nil {
		c.Masquerade = "off"
		if m.Enabled {
			c.Masquerade = strings.ToLower(m.Mode)
		}
	}
	c.AttachMode, c.DatapathMode = st.AttachMode, st.DatapathMode
	return c, nil
}

// kprValue reads kube-proxy-replacement as the agent reports or takes it:
// true/false since 1.14, strict/partial/disabled before (partial kept a
// kube-proxy for what it did not do, so it is not a replacement).
func kprValue(v string) *bool {
	switch strings.ToLower(v) {
	case "true", "strict":
		return ptr(true)
	case "false", "disabled", "partial", "probe":
		return ptr(false)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// CiliumFromNode is what an unprivileged look at the node says about its
// Cilium: the agent's flags (world-readable in /proc/<pid>/cmdline; an
// install that passes --config-dir instead leaves them silent) and its
// devices, which decide the tunnel: cilium_vxlan or cilium_geneve exist
// only in tunnel routing. No version (that needs the agent's API) and no
// host routing unless forced to legacy: by default the agent picks BPF
// host routing when the kernel and its other settings allow, which no flag
// shows.
func CiliumFromNode(args, links []string) Cilium {
	var c Cilium
	for _, l := range links {
		switch l {
		case "cilium_vxlan:vxlan":
			c.Routing, c.Tunnel = "tunnel", "vxlan"
		case "cilium_geneve:geneve":
			c.Routing, c.Tunnel = "tunnel", "geneve"
		}
	}
	if c.Routing == "" {
		hasHost := false
		for _, l := range links {
			hasHost = hasHost || strings.HasPrefix(l, "cilium_host:")
		}
		if hasHost {
			// The agent is up (it made cilium_host) and made no tunnel device.
			c.Routing = "native"
		}
	}
	c.KubeProxyReplacement = kprValue(FlagValue(args, "kube-proxy-replacement"))
	if k := c.KubeProxyReplacement; k != nil && *k {
		// Cilium 1.20 forces socket LB on with the replacement, whatever
		// --bpf-lb-sock says (pkg/kpr).
		c.SocketLB = ptr(true)
	} else if v := FlagValue(args, "bpf-lb-sock"); v != "" {
		c.SocketLB = ptr(v == "true")
	}
	if FlagValue(args, "enable-host-legacy-routing") == "true" {
		c.HostRouting = "legacy"
	}
	switch {
	case FlagValue(args, "enable-ipv4-masquerade") == "false":
		c.Masquerade = "off"
	case FlagValue(args, "enable-bpf-masquerade") == "true":
		c.Masquerade = "bpf"
	case len(args) > 0 && FlagValue(args, "config-dir") == "":
		c.Masquerade = "iptables" // the default, when the flags are the whole configuration
	}
	return c
}

// CiliumSocket is where the agent serves its API inside its own mount
// namespace. Not /var/run/…: /var/run is an absolute symlink, and a
// symlink met under /proc/<pid>/root resolves in the reader's root.
const CiliumSocket = "/run/cilium/cilium.sock"

// AskCilium reads the agent's datapath settings over its API socket: GET
// /v1/healthz, and /v1/debuginfo for the version. Reaching a socket through
// /proc/<pid>/root needs root with CAP_SYS_PTRACE (the agent holds
// capabilities its reader lacks).
func AskCilium(ctx context.Context, socket string) (Cilium, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	defer c.CloseIdleConnections()
	healthz, err := getAPI(ctx, c, "/v1/healthz")
	if err != nil {
		return Cilium{}, fmt.Errorf("cilium-agent API at %s: %w", socket, err)
	}
	// debuginfo lists every endpoint and Service too; only its version is read.
	debuginfo, err := getAPI(ctx, c, "/v1/debuginfo")
	if err != nil {
		debuginfo = nil
	}
	return ParseCiliumAPI(healthz, debuginfo)
}

// maxAPIBody bounds an API answer: debuginfo carries every Service, so a
// node behind 50,000 of them answers with megabytes.
const maxAPIBody = 64 << 20

func getAPI(ctx context.Context, c *http.Client, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return b, nil
}
