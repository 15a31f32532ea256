package result

import (
	"fmt"
	"strings"
)

// Path MTU verdicts (PathMTU.Verdict).
const (
	// PathOK: the client's own link MTU crossed the whole path.
	PathOK = "ok"
	// PathICMP: a router on the path answered a larger size with ICMP
	// fragmentation-needed, and the size it named (or the largest below
	// it) crossed.
	PathICMP = "icmp"
	// PathBlackHole: a size above MTU neither arrived nor brought an ICMP
	// error within the timeout, after retries: TCP over this path stalls
	// on full-size segments unless its MSS is clamped below.
	PathBlackHole = "black_hole"
)

// PathMTU is what one path carries, measured once per arm before its
// steps (pkg/pathmtu): the largest IPv4 packet that crossed from the
// client to the server and was answered, found with don't-fragment UDP
// probes, how the search ended, and the MSS TCP negotiated on a real
// connection over the same path. Sizes are IPv4 packet lengths in bytes,
// headers included.
type PathMTU struct {
	// Target is the address:port probed (the arm's server).
	Target string `json:"target"`
	// Verdict is PathOK, PathICMP or PathBlackHole; "" when no probe was
	// answered (then MTU is null and Missing["mtu"] says why).
	Verdict string `json:"verdict"`
	// MTU is the largest size that arrived and was answered.
	MTU *int `json:"mtu"`
	// LinkMTU is the MTU of the client's own link toward the target: what
	// the kernel refuses to send a larger packet than.
	LinkMTU *int `json:"link_mtu"`
	// ICMPMTU is the next-hop MTU an ICMP fragmentation-needed named;
	// absent when none came.
	ICMPMTU *int `json:"icmp_mtu,omitempty"`
	// BlackHoleFrom is the smallest size that vanished without an ICMP
	// error; absent unless Verdict is PathBlackHole.
	BlackHoleFrom *int `json:"black_hole_from,omitempty"`
	// KernelPMTU is the path MTU the client's kernel holds for the target
	// after the probes (IP_MTU on the probing socket).
	KernelPMTU *int `json:"kernel_pmtu"`
	// Probes counts the datagrams sent, retries included; Seconds is how
	// long the search took.
	Probes  int     `json:"probes"`
	Seconds float64 `json:"seconds"`
	// TCPMSS is the MSS the connection negotiated, as the MSS option
	// counts it: tcpi_snd_mss plus the option bytes every segment carries
	// (12 with timestamps) = min(the server's MSS option, the path MTU
	// − 40) — and, at a connection's start, at most half the server's
	// first window, which only loopback's 64 KiB MTU reaches. TCPSndMSS is
	// the payload of a full segment (tcpi_snd_mss), TCPAdvMSS the MSS
	// option the client sent (tcpi_advmss plus the option bytes), TCPPMTU
	// the path MTU the connection used (tcpi_pmtu).
	TCPMSS    *int `json:"tcp_mss"`
	TCPSndMSS *int `json:"tcp_snd_mss"`
	TCPAdvMSS *int `json:"tcp_adv_mss"`
	TCPPMTU   *int `json:"tcp_pmtu"`
	// Tunnel and UnderlayMTU are set by a lab on a path its pods' traffic
	// crosses encapsulated: the encapsulation, and the MTU of the link it
	// runs over, so UnderlayMTU − MTU is what the tunnel costs each packet.
	Tunnel      string `json:"tunnel,omitempty"`
	UnderlayMTU *int   `json:"underlay_mtu,omitempty"`
	// Missing maps a field (mtu, tcp_mss …) to why it is null.
	Missing map[string]string `json:"missing,omitempty"`
}

// SetMissing records why the field named key could not be measured.
func (p *PathMTU) SetMissing(key, reason string) {
	if p.Missing == nil {
		p.Missing = map[string]string{}
	}
	p.Missing[key] = reason
}

// Summary is the path in a few words, as the report prints it beside the
// arm's figures: "1450 (vxlan −50), MSS 1410", "black hole above 1400,
// MSS 1460", "1400 (ICMP frag-needed), MSS 1360".
func (p *PathMTU) Summary() string {
	var parts []string
	switch {
	case p.MTU == nil:
		why := p.Missing["mtu"]
		if why == "" {
			why = "not measured"
		}
		parts = append(parts, "path MTU unknown: "+why)
	case p.Verdict == PathBlackHole:
		parts = append(parts, fmt.Sprintf("black hole above %d", *p.MTU))
	default:
		s := fmt.Sprint(*p.MTU)
		var why []string
		if p.Verdict == PathICMP {
			why = append(why, "ICMP frag-needed")
		}
		if p.Tunnel != "" && p.UnderlayMTU != nil {
			why = append(why, fmt.Sprintf("%s −%d", p.Tunnel, *p.UnderlayMTU-*p.MTU))
		}
		if len(why) > 0 {
			s += " (" + strings.Join(why, ", ") + ")"
		}
		parts = append(parts, s)
	}
	if p.TCPMSS != nil {
		parts = append(parts, fmt.Sprintf("MSS %d", *p.TCPMSS))
	}
	return strings.Join(parts, ", ")
}
