package disrupt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
)

// EventKind names an event source.
type EventKind string

// The event sources.
const (
	// Blackhole drops every IPv4 packet reaching the server's namespace
	// for a set time (one nftables rule at the raw priority, added and
	// deleted): the known outage the timeline's resolution is checked
	// against.
	Blackhole EventKind = "blackhole"
	// ProxyResync is kube-proxy's full resync on every node (needs the
	// lab's proxy= and services= knobs).
	ProxyResync EventKind = "kube-proxy-resync"
	// EndpointChange moves one Service's endpoint among N (not the probed
	// Service's) on every node; the change is reverted before the next
	// event, and the revert is an event of its own.
	EndpointChange EventKind = "endpoint-change"
	// PolicyReplace replaces the server pod's policy set (policies=N).
	PolicyReplace EventKind = "policy-replace"
	// VswitchdRestart restarts a node's private ovs-vswitchd
	// (ovs-netdev-geneve, the OVN presets): the datapath agent's restart.
	VswitchdRestart EventKind = "vswitchd-restart"
	// OVNControllerRestart restarts a node's ovn-controller (OVN presets).
	OVNControllerRestart EventKind = "ovn-controller-restart"
	// OVNNorthdRestart restarts ovn-northd (OVN presets).
	OVNNorthdRestart EventKind = "ovn-northd-restart"
	// OVNNBRestart restarts the northbound database's ovsdb-server.
	OVNNBRestart EventKind = "ovn-nb-restart"
	// OVNSBRestart restarts the southbound database's ovsdb-server.
	OVNSBRestart EventKind = "ovn-sb-restart"
)

// EventKinds lists the event sources, for help and errors.
var EventKinds = []EventKind{Blackhole, ProxyResync, EndpointChange, PolicyReplace,
	VswitchdRestart, OVNControllerRestart, OVNNorthdRestart, OVNNBRestart, OVNSBRestart}

// restarts maps each restart event to the lab daemon it restarts.
var restarts = map[EventKind]lab.PrivateDaemon{
	VswitchdRestart:      lab.Vswitchd,
	OVNControllerRestart: lab.OVNController,
	OVNNorthdRestart:     lab.OVNNorthd,
	OVNNBRestart:         lab.OVNNorthbound,
	OVNSBRestart:         lab.OVNSouthbound,
}

// Source is an event source bound to a lab.
type Source interface {
	// Netns lists the namespaces whose rules Fire changes: journaled
	// before, checked byte for byte after the undo.
	Netns() []string
	// Fire makes the change. It returns what it did, and undo when the
	// change stays until undone (nil when Fire left nothing changed: a
	// resync that rewrote the same rules, a blackhole already lifted, a
	// daemon started again).
	Fire(ctx context.Context) (Fired, func(context.Context) (*time.Duration, error), error)
}

// Fired is one change as its source saw it.
type Fired struct {
	// CPU is the agent's work; nil with CPUReason when there is none.
	CPU       *time.Duration
	CPUReason string
	// Start and End are the change's own instants where the source knows
	// them (a restart: the kill, and the lab serving again); zero: the
	// instants around Fire.
	Start, End time.Time
	// Detail adds to the event's description what happened (a restart's
	// phases).
	Detail string
}

// blackhole is the Blackhole source.
type blackhole struct {
	ns    string
	table string
	dur   time.Duration
}

func (b *blackhole) Netns() []string { return []string{b.ns} }

func (b *blackhole) Fire(ctx context.Context) (Fired, func(context.Context) (*time.Duration, error), error) {
	undo := func(context.Context) (*time.Duration, error) { return nil, b.lift() }
	if err := b.drop(); err != nil {
		// The batch is atomic, but a failure after the kernel took it
		// (a lost acknowledgement) is still undone.
		return Fired{}, undo, err
	}
	tm := time.NewTimer(b.dur)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
		return Fired{}, undo, ctx.Err()
	}
	if err := b.lift(); err != nil {
		return Fired{}, undo, err
	}
	return Fired{CPUReason: "a blackhole is a rule of the kernel's; no agent does work during it"}, nil, nil
}

// drop adds table cnb-<id>-blackhole with `prerouting priority raw; drop`.
func (b *blackhole) drop() error {
	c, done, err := nftIn(b.ns)
	if err != nil {
		return err
	}
	defer done()
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: b.table})
	ch := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRaw})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("blackhole: add table %s in %s: %w", b.table, b.ns, err)
	}
	return nil
}

// lift deletes the table; a table already gone is no error.
func (b *blackhole) lift() error {
	c, done, err := nftIn(b.ns)
	if err != nil {
		return err
	}
	defer done()
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: b.table})
	if err := c.Flush(); err != nil && !isNotFound(err) {
		return fmt.Errorf("blackhole: delete table %s in %s: %w", b.table, b.ns, err)
	}
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) }

// nftIn opens nftables netlink inside ns without moving the caller.
func nftIn(ns string) (*nftables.Conn, func(), error) {
	f, err := os.Open(netns.Path(ns))
	if err != nil {
		return nil, nil, fmt.Errorf("open netns %q: %w", ns, err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("nftables in %s: %w", ns, err)
	}
	return c, func() { f.Close() }, nil
}

// agentSource is one of the lab's own agents' updates.
type agentSource struct {
	netns []string
	fire  func(ctx context.Context) (lab.AgentWork, error)
	undo  func(ctx context.Context) (lab.AgentWork, error)
}

func (a *agentSource) Netns() []string { return a.netns }

func (a *agentSource) Fire(ctx context.Context) (Fired, func(context.Context) (*time.Duration, error), error) {
	w, err := a.fire(ctx)
	var undo func(context.Context) (*time.Duration, error)
	if a.undo != nil {
		undo = func(ctx context.Context) (*time.Duration, error) {
			w, err := a.undo(ctx)
			return &w.CPU, err
		}
	}
	return Fired{CPU: &w.CPU}, undo, err
}

// restartSource restarts one of the lab's private daemons. It has no
// undo: the daemon started again is the lab as it was, which the
// journal's check at the end of the arm confirms.
type restartSource struct {
	l      *lab.Lab
	daemon lab.PrivateDaemon
	node   int
	netns  []string
}

func (r *restartSource) Netns() []string { return r.netns }

func (r *restartSource) Fire(ctx context.Context) (Fired, func(context.Context) (*time.Duration, error), error) {
	rs, err := r.l.Restart(ctx, r.daemon, r.node)
	if err != nil {
		return Fired{Start: rs.Killed}, nil, err
	}
	since := func(t time.Time) float64 { return float64(t.Sub(rs.Killed).Microseconds()) / 1e3 }
	return Fired{CPU: &rs.CPU, Start: rs.Killed, End: rs.Back,
		Detail: fmt.Sprintf("SIGTERM at 0; old pid gone at %.1f ms, new pid %d started at %.1f ms, serving again at %.1f ms",
			since(rs.Exited), rs.Daemon.PID, since(rs.Started), since(rs.Back))}, nil, nil
}

// NewSource binds an event to a running lab.
func NewSource(l *lab.Lab, ev EventSpec, id string) (Source, error) {
	switch ev.Kind {
	case Blackhole:
		srv, err := l.Endpoint("server")
		if err != nil {
			return nil, err
		}
		return &blackhole{ns: srv.Netns, table: runid.Name(id, "blackhole"), dur: time.Duration(ev.Duration)}, nil
	case ProxyResync:
		return &agentSource{netns: l.NodeNetns(), fire: l.ProxyResync}, nil
	case EndpointChange:
		svc := ev.Service
		return &agentSource{netns: l.NodeNetns(),
			fire: func(ctx context.Context) (lab.AgentWork, error) {
				return l.ProxySetEndpoint(ctx, svc, lab.ChangedEndpoint(svc))
			},
			undo: func(ctx context.Context) (lab.AgentWork, error) { return l.ProxySetEndpoint(ctx, svc, net.IP(nil)) },
		}, nil
	case PolicyReplace:
		return &agentSource{netns: l.NodeNetns(), fire: l.PolicyReplace}, nil
	case VswitchdRestart, OVNControllerRestart, OVNNorthdRestart, OVNNBRestart, OVNSBRestart:
		d := restarts[ev.Kind]
		if err := lab.CheckRestart(l.Spec, d, ev.Node); err != nil {
			return nil, fmt.Errorf("event %s: %w", ev.Kind, err)
		}
		ns := l.DaemonNetns()
		if d.PerNode() {
			ns = l.NodeNetns()[ev.Node-1]
		}
		return &restartSource{l: l, daemon: d, node: ev.Node, netns: []string{ns}}, nil
	}
	return nil, fmt.Errorf("event %q: want one of %v", ev.Kind, EventKinds)
}
