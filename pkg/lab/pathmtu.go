package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/pathmtu"
	"github.com/cnibench/cnibench/pkg/result"
)

// ProbePath measures the path from endpoint client to endpoint server
// (pkg/pathmtu): its MTU and how it is bounded, and TCP's MSS over it. The
// probes go to the server's port 7420 — the port the lab's Services lead
// to, so a Service endpoint is probed through its DNAT — where a
// responder listens in the server's namespace while the probe runs; where
// that port is taken (a `cnibench server` started by hand, which answers
// probes itself) the probes go to what listens. On a path the pods'
// traffic crosses encapsulated, the result also names the tunnel and the
// underlay's MTU, so what the tunnel costs shows. The result is non-nil
// once both endpoints exist, also with an error (see pathmtu.Probe).
func (l *Lab) ProbePath(ctx context.Context, client, server string) (*result.PathMTU, error) {
	ce, err := l.Endpoint(client)
	if err != nil {
		return nil, err
	}
	se, err := l.Endpoint(server)
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(servicePort)
	r, err := pathmtu.Respond(se.Netns, net.JoinHostPort("0.0.0.0", port))
	switch {
	case errors.Is(err, pathmtu.ErrInUse):
	case err != nil:
		return nil, err
	default:
		defer r.Close()
	}
	p, err := pathmtu.Probe(ctx, pathmtu.Options{Target: net.JoinHostPort(se.IP, port), Netns: ce.Netns})
	if p != nil {
		l.nameTunnel(p, ce, se)
	}
	return p, err
}

// nameTunnel sets the tunnel and the underlay's MTU on a path between pods
// of different nodes of a topology that encapsulates between them.
func (l *Lab) nameTunnel(p *result.PathMTU, ends ...Endpoint) {
	s := l.Spec
	t := s.row()
	if t == nil || t.tunnel == noTunnel {
		return
	}
	lo := makeLayout(s, l.ID)
	var nodes []int
	for _, e := range ends {
		for _, pd := range lo.pods {
			if e.Kind == "pod" && pd.netns == e.Netns {
				nodes = append(nodes, pd.node)
				break
			}
		}
	}
	if len(nodes) != 2 || nodes[0] == nodes[1] || nodes[0] == 0 || nodes[1] == 0 {
		return
	}
	p.Tunnel = t.tunnel.name
	if s.OVN != nil {
		if tun, ok := ovnTunnels[s.OVN.Tunnel]; ok {
			p.Tunnel = tun.name
		}
	}
	under := lo.underMTU
	p.UnderlayMTU = &under
}

// ProbeMTUHelp is `cnibench probe mtu --help`'s description.
const ProbeMTUHelp = `Finds the largest IPv4 packet that crosses a path and is answered, with UDP probes
that may not be fragmented, and how it is bounded: the client's own link ("ok"), a
router's ICMP fragmentation-needed ("limited by ICMP"), or a size that neither arrives
nor brings an ICMP error back ("black hole above N"); then the MSS TCP negotiates on a
connection to the same port. At most 2 s per path. A lab's path (--lab; a responder
answers in the server's namespace on port 7420), or from --netns (default: here) to a
running cnibench server, whose UDP port answers the probes. Needs root for namespaces.`

// ProbeMTUExamples is `cnibench probe mtu --help`'s examples.
const ProbeMTUExamples = `  cnibench probe mtu --lab demo                       # client → server
  cnibench probe mtu --lab demo --from node1 --to node2
  cnibench probe mtu --netns k8slab-n1 --server 10.244.2.7`

// ProbeMTUCommand is `cnibench probe mtu`: a lab's path (Lab, From, To),
// or the path from a namespace (Netns, "" = this one) to a running
// cnibench server (Server, HOST[:PORT]).
type ProbeMTUCommand struct {
	Lab, From, To string
	Netns, Server string
}

// Run checks the flags (ErrInvalid) and probes the path.
func (c ProbeMTUCommand) Run(ctx context.Context) (*result.PathMTU, error) {
	switch {
	case (c.Lab == "") == (c.Server == ""):
		return nil, errkind.Errorf(ErrInvalid, "give --lab NAME (a lab's path) or --server HOST[:PORT] (a running cnibench server), not both or neither")
	case c.Lab != "" && c.Netns != "":
		return nil, errkind.Errorf(ErrInvalid, "--netns goes with --server; with --lab the path's ends are --from and --to")
	case c.Lab == "" && (c.From != "" || c.To != ""):
		return nil, errkind.Errorf(ErrInvalid, "--from and --to name a lab's endpoints: give --lab NAME")
	}
	if c.Server != "" {
		target := c.Server
		if _, _, err := net.SplitHostPort(target); err != nil {
			target = net.JoinHostPort(target, strconv.Itoa(servicePort))
		}
		return pathmtu.Probe(ctx, pathmtu.Options{Target: target, Netns: c.Netns})
	}
	l, err := Get(c.Lab)
	if errors.Is(err, ErrNoLab) {
		return nil, errkind.Wrap(ErrInvalid, err)
	}
	if err != nil {
		return nil, err
	}
	from, to := c.From, c.To
	if from == "" {
		from = "client"
	}
	if to == "" {
		to = "server"
	}
	for _, e := range []string{from, to} {
		if _, err := l.Endpoint(e); err != nil {
			return nil, errkind.Wrap(ErrInvalid, err)
		}
	}
	p, err := l.ProbePath(ctx, from, to)
	if err != nil && p != nil {
		return nil, fmt.Errorf("%s → %s: %w", from, to, err)
	}
	return p, err
}
