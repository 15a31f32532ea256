package pressure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/sysinfo"
)

// Arm is one datapath to ramp: a resolved lab spec and its endpoints.
type Arm struct {
	Name     string
	Topology string
	Knobs    map[string]string
	Spec     *lab.Spec
	Client   string // lab endpoint names; "" = client, server
	Server   string
}

// Options are a run's inputs beside the arms.
type Options struct {
	Config Config
	Log    io.Writer // progress lines; nil = none
	// Binary is the cnibench executable that runs the server end
	// (`cnibench pressure-server`); "" = this one. Tests set it: their own
	// executable is the test binary.
	Binary string
}

// Run ramps every arm for every flows value and repeat, the arms
// interleaved within each (flows, repeat) round so drift spreads over all
// of them. Each ramp gets a lab of its own, built before it and removed
// after it (so every ramp starts with an empty conntrack table, and a lab
// that changes a host-wide limit holds it only for its own ramp). A lab
// that fails is that ramp's error; ctx cancelled stops the run, with every
// lab removed.
func Run(ctx context.Context, arms []Arm, o Options) ([]ArmResult, error) {
	cfg := o.Config
	if err := checkFileLimit(cfg); err != nil {
		return nil, err
	}
	out := make([]ArmResult, len(arms))
	for i, a := range arms {
		out[i] = ArmResult{Arm: a.Name, Topology: a.Topology, Knobs: a.Knobs}
	}
	for rep := 1; rep <= cfg.Repeats; rep++ {
		for _, flows := range cfg.Flows {
			for i := range arms {
				// Rotate the arm order each round, as the experiment runner does.
				a := (i + rep - 1) % len(arms)
				if err := ctx.Err(); err != nil {
					return out, err
				}
				logf(o.Log, "%s: %d held flows, ramp %d of %d", arms[a].Name, flows, rep, cfg.Repeats)
				r, err := rampArm(ctx, arms[a], flows, cfg, o)
				r.Flows, r.Repeat = flows, rep
				if err != nil {
					r.Error = err.Error()
					logf(o.Log, "%s: %v", arms[a].Name, err)
				}
				out[a].Ramps = append(out[a].Ramps, r)
				if ctx.Err() != nil {
					return out, ctx.Err()
				}
			}
		}
	}
	return out, nil
}

func logf(w io.Writer, f string, a ...any) {
	if w != nil {
		fmt.Fprintf(w, f+"\n", a...)
	}
}

// rampArm builds the arm's lab, ramps it and removes it on every path.
func rampArm(ctx context.Context, a Arm, flows int, cfg Config, o Options) (r Ramp, err error) {
	l, err := lab.Up(ctx, a.Spec, lab.UpOptions{})
	if err != nil {
		return r, fmt.Errorf("lab up: %w", err)
	}
	r.LabID = l.ID
	defer func() {
		// A fresh context: the lab comes down also when ctx was cancelled.
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if derr := l.Down(dctx); derr != nil {
			err = errors.Join(err, fmt.Errorf("lab down %s: %w", l.Name, derr))
		}
	}()
	cname, sname := a.Client, a.Server
	if cname == "" {
		cname = "client"
	}
	if sname == "" {
		sname = "server"
	}
	srcNote := ""
	cli, err := l.Endpoint(cname)
	if err != nil {
		return r, err
	}
	srv, err := l.Endpoint(sname)
	if err != nil {
		return r, err
	}
	if a.Spec.Fastpath != "" && cfg.Sources > 1 {
		// The fast path's maps hold each pod's one address: traffic from
		// another would take the kernel's path, conntrack included, and
		// measure that instead.
		cfg.Sources = 1
		srcNote = "one source address: the eBPF fast path knows only each pod's own"
	}
	id := r.LabID
	r, err = ramp(ctx, l, cli, srv, flows, cfg, o)
	r.LabID = id
	if srcNote != "" {
		r.SourcesNote = srcNote
	}
	return r, err
}

// nsSysctls are the settings the run makes in the lab's own client and
// server namespaces so that the ends are not the limit: all source ports
// on the client, a deep listen queue on the server. They go with the
// namespaces (nothing on the host), so there is nothing to undo.
func nsSysctls(cli, srv lab.Endpoint) error {
	set := func(ns string, kv [][2]string) error {
		return netns.Do(ns, func() error {
			for _, s := range kv {
				p := filepath.Join("/proc/sys", strings.ReplaceAll(s[0], ".", "/"))
				if err := os.WriteFile(p, []byte(s[1]), 0); err != nil {
					return fmt.Errorf("%s in %s: %w", s[0], ns, err)
				}
			}
			return nil
		})
	}
	if err := set(cli.Netns, [][2]string{{"net.ipv4.ip_local_port_range", "1024 65535"}}); err != nil {
		return err
	}
	return set(srv.Netns, [][2]string{{"net.core.somaxconn", "65535"}, {"net.ipv4.tcp_max_syn_backlog", "65535"}})
}

type stepReq struct {
	rate float64
}

type stepRes struct {
	c   StepCounts
	err error
}

// ramp runs the server, the holder and the generator in the lab's
// namespaces and the steps up to the knee.
func ramp(ctx context.Context, l *lab.Lab, cli, srv lab.Endpoint, flows int, cfg Config, o Options) (Ramp, error) {
	log := o.Log
	r := Ramp{Held: Held{Asked: flows}}
	if cli.Netns == "" || srv.Netns == "" {
		return r, errors.New("pressure needs the client and the server in namespaces of the lab (pods), not the host")
	}
	srvIP, err := netip.ParseAddr(srv.IP)
	if err != nil || !srvIP.Is4() {
		return r, fmt.Errorf("server address %q: pressure runs over IPv4", srv.IP)
	}
	dst := netip.AddrPortFrom(srvIP, Port)
	if l.ServiceIP != "" && srv.Name == "service" {
		return r, errors.New("pressure does not ramp through a Service VIP yet; use the server pod")
	}
	if err := nsSysctls(cli, srv); err != nil {
		return r, err
	}
	srcs, note, err := addSources(l, cli, cfg.Sources)
	if err != nil {
		return r, err
	}
	for _, a := range srcs {
		r.Sources = append(r.Sources, a.String())
	}
	r.SourcesNote = note

	var wg sync.WaitGroup
	var mu sync.Mutex
	var bgErr error
	keep := func(err error) {
		if err != nil {
			mu.Lock()
			bgErr = errors.Join(bgErr, err)
			mu.Unlock()
		}
	}
	// The server, a process of its own (serve.go).
	sp, err := startServer(o.Binary, srv.Netns, srvIP)
	if err != nil {
		return r, err
	}
	// The holder.
	h := &holder{srcs: srcs, dst: dst, interval: time.Duration(cfg.HoldPing), stall: 3 * time.Second, opened: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		keep(netns.Do(cli.Netns, func() error { return h.run(flows) }))
	}()
	// The generator: one thread for the whole ramp, a step per request.
	reqs := make(chan stepReq)
	res := make(chan stepRes)
	wg.Add(1)
	go func() {
		defer wg.Done()
		keep(netns.Do(cli.Netns, func() error {
			for q := range reqs {
				c, err := generate(srcs, dst, q.rate, time.Duration(cfg.Step), time.Duration(cfg.ConnectTimeout), cfg.MaxInflight)
				res <- stepRes{c, err}
			}
			return nil
		}))
	}()
	stop := func() {
		close(reqs)
		h.stop.Store(true)
		wg.Wait()
		keep(sp.stop())
	}

	roles := map[string]string{}
	for _, e := range l.Endpoints {
		if e.Netns != "" {
			if _, ok := roles[e.Netns]; !ok || e.Kind == "pod" && (e.Name == "client" || e.Name == "server") {
				roles[e.Netns] = e.Name
			}
		}
	}
	for _, ns := range l.Namespaces {
		if roles[ns] == "" {
			roles[ns] = ns
		}
	}
	open0, open0Err := snapAll(l.Namespaces)
	select {
	case <-h.opened:
	case <-ctx.Done():
		stop()
		return r, ctx.Err()
	}
	r.Held.Established, r.Held.OpenFailed = h.established.Load(), h.openFailed.Load()
	r.Held.OpenSeconds = h.openTime.Seconds()
	logf(log, "  held %d of %d flows in %.1fs", r.Held.Established, flows, r.Held.OpenSeconds)
	r.Held.OpenTimedOut, r.Held.OpenRefused, r.Held.OpenClient = h.openTimedOut.Load(), h.openRefused.Load(), h.openClient.Load()
	if open0Err == nil {
		if open1, err := snapAll(l.Namespaces); err == nil {
			r.Held.Counters = nsDeltas(open0, open1, roles)
		}
	}
	om := newOVSMeter(l)
	var err2 error
	for _, rate := range cfg.Rates {
		if ctx.Err() != nil {
			err2 = ctx.Err()
			break
		}
		before, err := snapAll(l.Namespaces)
		if err != nil {
			err2 = err
			break
		}
		var ov0 ovsSnap
		var ovErr error
		if om != nil {
			ov0, ovErr = om.snap(ctx)
		}
		st0, stErr := sysinfo.Host.ReadStat()
		reqs <- stepReq{rate: float64(rate)}
		sr := <-res
		if sr.err != nil {
			err2 = fmt.Errorf("step %d/s: %w", rate, sr.err)
			break
		}
		after, err := snapAll(l.Namespaces)
		if err != nil {
			err2 = err
			break
		}
		step := makeStep(float64(rate), time.Duration(cfg.Step), sr.c, before, after, roles)
		if om != nil {
			if ovErr == nil {
				var ov1 ovsSnap
				if ov1, ovErr = om.snap(ctx); ovErr == nil {
					step.OVS = &OVSDatapath{Hit: ov1.hit - ov0.hit, Missed: ov1.missed - ov0.missed, Lost: ov1.lost - ov0.lost, Flows: ov1.flows, Shared: om.shared}
				}
			}
			if ovErr != nil {
				step.OVSMissing = ovErr.Error()
			}
		}
		if stErr == nil {
			if st1, err := sysinfo.Host.ReadStat(); err == nil {
				if d, err := sysinfo.DeltaStat(st0, st1); err == nil {
					b := (100 - d.Total.Idle - d.Total.Iowait - d.Total.Steal) / 100
					step.HostCPUBusy = &b
				} else {
					stErr = err
				}
			} else {
				stErr = err
			}
		}
		if step.HostCPUBusy == nil {
			step.HostCPUMissing = fmt.Sprint(stErr)
		}
		step.HeldAlive = h.established.Load() - h.broken.Load()
		step.HeldBroken, step.HeldStalled = h.broken.Load(), h.stalled.Load()
		step.OK = stepOK(&step, cfg.FailShare) && step.HeldBroken == 0
		r.Steps = append(r.Steps, step)
		logf(log, "  %6d/s offered: %8.0f/s done, %5.1f%% failed, client cpu %3.0f%%", rate, step.AchievedRate, 100*step.FailedShare, 100*step.ClientCPU)
		if !step.OK {
			k := explain(&step)
			if n := len(r.Steps); n > 1 {
				v := r.Steps[n-2].AchievedRate
				k.LastGoodRate = &v
			}
			r.Knee = &k
			break
		}
	}
	stop()
	if r.Knee == nil && err2 == nil {
		r.NoKnee = fmt.Sprintf("every step held, up to %d/s offered", cfg.Rates[len(cfg.Rates)-1])
	}
	return r, errors.Join(err2, bgErr)
}

// snapAll reads every namespace's counters.
func snapAll(nss []string) (map[string]Snapshot, error) {
	out := make(map[string]Snapshot, len(nss))
	for _, ns := range nss {
		s, err := Read(ns)
		if err != nil {
			return nil, err
		}
		out[ns] = s
	}
	return out, nil
}

// makeStep turns a step's counts and its counter snapshots into a Step.
func makeStep(rate float64, dur time.Duration, c StepCounts, before, after map[string]Snapshot, roles map[string]string) Step {
	s := Step{OfferedRate: rate, StepCounts: c}
	s.AchievedRate = float64(c.Completed) / dur.Seconds()
	if c.Attempted > 0 {
		s.FailedShare = float64(c.failed()) / float64(c.Attempted)
	}
	if p, ok := percentile(c.Lat, 0.5); ok {
		v := float64(p) / 1e6
		s.P50Ms = &v
		q, _ := percentile(c.Lat, 0.99)
		w := float64(q) / 1e6
		s.P99Ms = &w
	} else {
		s.LatencyMissing = "no connection completed"
	}
	if c.Wall > 0 && c.CPU >= 0 {
		s.ClientCPU = c.CPU.Seconds() / c.Wall.Seconds()
	}
	s.Namespaces = nsDeltas(before, after, roles)
	return s
}

// nsDeltas are each namespace's counters between two snapshots.
func nsDeltas(before, after map[string]Snapshot, roles map[string]string) []NSCounters {
	var out []NSCounters
	names := make([]string, 0, len(after))
	for ns := range after {
		names = append(names, ns)
	}
	sortStrings(names)
	for _, ns := range names {
		a, b := after[ns], before[ns]
		n := NSCounters{Netns: ns, Role: roles[ns], TCP: map[string]int64{}}
		for k, v := range a.TCP {
			n.TCP[k] = v - b.TCP[k]
		}
		if a.Conntrack && b.Conntrack {
			n.Conntrack, n.Count, n.Max = true, a.Count, a.Max
			d := a.Stats.Sub(b.Stats)
			n.Stats = &d
		}
		out = append(out, n)
	}
	return out
}

// checkFileLimit checks that this process can hold every socket of its
// end of a ramp (each held flow and each connection in flight is one): the
// client running out of descriptors (EMFILE) would be the client's limit,
// not the datapath's. The server is another process with a limit of its own.
func checkFileLimit(cfg Config) error {
	limit, err := raiseSoftFileLimit()
	if err != nil {
		return err
	}
	if need := uint64(slices.Max(cfg.Flows) + cfg.MaxInflight + 512); need > limit {
		return fmt.Errorf("%w: flows %d + max_inflight %d need %d open files at each end, and a process here may hold %d (ulimit -Hn; raising it needs CAP_SYS_RESOURCE): lower flows or max_inflight",
			ErrInvalid, slices.Max(cfg.Flows), cfg.MaxInflight, need, limit)
	}
	return nil
}
