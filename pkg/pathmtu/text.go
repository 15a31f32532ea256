package pathmtu

import (
	"fmt"
	"io"

	"github.com/cnibench/cnibench/pkg/result"
)

// WriteText prints a probed path: its summary, then what the search saw
// and the TCP connection's figures.
func WriteText(w io.Writer, p *result.PathMTU) error {
	fmt.Fprintf(w, "path to %s: %s\n", p.Target, p.Summary())
	noun := "probes"
	if p.Probes == 1 {
		noun = "probe"
	}
	took := fmt.Sprintf("%d %s in %.1f ms", p.Probes, noun, p.Seconds*1000)
	if p.KernelPMTU != nil {
		took += fmt.Sprintf("; the kernel's path MTU for it now %d", *p.KernelPMTU)
	}
	switch {
	case p.MTU == nil:
		fmt.Fprintf(w, "  no MTU: %s (%s)\n", p.Missing["mtu"], took)
	case p.Verdict == result.PathOK:
		largest := ""
		if *p.MTU == maxPacket {
			largest = ", the largest IPv4 packet"
		}
		fmt.Fprintf(w, "  ok: packets of the client's link MTU (%d%s) crossed; %s\n", *p.MTU, largest, took)
	case p.Verdict == result.PathICMP:
		fmt.Fprintf(w, "  limited by ICMP: a router answered larger packets with frag-needed (next hop MTU %s); %d crossed; link MTU %s; %s\n",
			orDash(p.ICMPMTU), *p.MTU, orDash(p.LinkMTU), took)
	case p.Verdict == result.PathBlackHole:
		fmt.Fprintf(w, "  black hole: %s bytes neither arrived nor brought an ICMP error (each size tried again before it counted); %d crossed; link MTU %s; %s\n",
			orDash(p.BlackHoleFrom), *p.MTU, orDash(p.LinkMTU), took)
	}
	if p.TCPMSS == nil {
		_, err := fmt.Fprintf(w, "  TCP: no MSS: %s\n", p.Missing["tcp_mss"])
		return err
	}
	opts := ""
	if d := *p.TCPMSS - *p.TCPSndMSS; d > 0 {
		opts = fmt.Sprintf(" + %d of TCP timestamps", d)
	}
	_, err := fmt.Fprintf(w, "  TCP: MSS %d (%d bytes of payload per segment%s); the client's SYN offered %s; the connection's path MTU %s\n",
		*p.TCPMSS, *p.TCPSndMSS, opts, orDash(p.TCPAdvMSS), orDash(p.TCPPMTU))
	return err
}

func orDash(v *int) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprint(*v)
}
