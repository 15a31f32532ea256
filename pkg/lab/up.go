package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"github.com/cnibench/cnibench/pkg/probe"
	"github.com/cnibench/cnibench/pkg/runid"
)

// UpOptions tunes Up.
type UpOptions struct {
	Name string    // lab name; "" = <topology>-<id>
	Log  io.Writer // progress lines; nil = silent
}

// newID makes run ids; a variable so tests can know the id of a failing Up.
var newID = runid.New

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// Up builds the topology described by s. The state file is written before
// the first object is created; if anything fails, or ctx is cancelled
// (Ctrl-C), Up removes what it created and returns the error.
func Up(ctx context.Context, s *Spec, o UpOptions) (_ *Lab, err error) {
	start := time.Now()
	if s == nil || !s.resolved {
		// Resolve checked every knob and the whole spec; Up trusts what it
		// made and builds nothing from a spec that did not come from it.
		return nil, invalidError{errors.New("lab up: the topology spec was not made by lab.Resolve or lab.Preset")}
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("lab up: needs root (network namespaces and netlink); run with sudo")
	}
	id := newID()
	name := o.Name
	if name == "" {
		name = s.Topology + "-" + id
	}
	if !nameRE.MatchString(name) {
		return nil, invalidError{fmt.Errorf("lab name %q: use 1-63 letters, digits, '.', '_' or '-'", name)}
	}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("lab state dir: %w", err)
	}
	// Reserve the name: O_EXCL makes two concurrent `up --name X` safe.
	f, err := os.OpenFile(statePath(name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil, invalidError{fmt.Errorf("lab %q already exists (remove it with `cnibench lab down %s`, or pick another --name): %w", name, name, os.ErrExist)}
	}
	if err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	f.Close()
	reserved := true
	defer func() {
		if reserved {
			_ = os.Remove(statePath(name))
		}
	}()

	if err := probeHost(ctx, s, id); err != nil {
		return nil, err
	}
	l := plan(s, id, name)
	l.Created, l.PID = start.UTC(), os.Getpid()
	if err := l.save(); err != nil {
		return nil, err
	}
	reserved = false

	success := false
	defer func() {
		if success {
			return
		}
		// The caller's ctx may be the cancelled one; undo regardless.
		if terr := l.Down(context.WithoutCancel(ctx)); terr != nil {
			err = fmt.Errorf("%w; undo also failed: %v (run `cnibench lab clean`)", err, terr)
		}
	}()

	b := &builder{l: l, s: s, log: o.Log}
	defer b.close()
	if err := b.build(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lab up %s: interrupted (%v); everything created was removed", name, ctx.Err())
		}
		return nil, fmt.Errorf("lab up %s: %w; everything created was removed", name, err)
	}
	l.Complete = true
	l.UpTime = time.Since(start).Round(time.Microsecond).String()
	if err := l.save(); err != nil {
		return nil, err
	}
	success = true
	return l, nil
}

// probeHost checks what the topology and its fast path need from the host
// before anything is created, so a missing feature leaves nothing behind.
func probeHost(ctx context.Context, s *Spec, id string) error {
	if err := s.row().probe(ctx, s, id); err != nil {
		return err
	}
	if s.Fastpath != "" {
		err := probe.Require(ctx, runid.Name(id, "probe"), fastpathNeeds...)
		if errors.Is(err, probe.ErrNotSupported) {
			return fmt.Errorf("fastpath=%s: %w by this kernel (%v); nothing was created", s.Fastpath, ErrNotSupported, err)
		}
		if err != nil {
			return fmt.Errorf("fastpath=%s: probe: %w; nothing was created", s.Fastpath, err)
		}
	}
	return nil
}

// probeNothing is the probe of a topology that needs nothing beyond
// namespaces and veth pairs (and VXLAN, which every supported kernel has).
func probeNothing(context.Context, *Spec, string) error { return nil }

// probeKernelTunnel asks pkg/probe whether the kernel has the topology's
// tunnel (the capability named like the preset), in a namespace named for
// this lab so that `lab clean --id` finds it after a SIGKILL.
func probeKernelTunnel(ctx context.Context, s *Spec, id string) error {
	t := s.row()
	err := probe.Require(ctx, runid.Name(id, "probe"), t.name)
	if errors.Is(err, probe.ErrNotSupported) {
		return fmt.Errorf("%s: %w by this kernel (%s); nothing was created", t.name, ErrNotSupported, t.tunnel.kernelOption)
	}
	if err != nil {
		return fmt.Errorf("%s: probe: %w; nothing was created", t.name, err)
	}
	return nil
}

// ProbeHelp is `cnibench probe --help`'s description.
const ProbeHelp = `Probe tunnels (vxlan, geneve, ipip, gre, wireguard), netkit, IPsec ESP, Open vSwitch
(kernel, userspace, DPDK), VDUSE/vDPA, the eBPF pieces of a host-routing fast path
(BTF, bpf_redirect_peer/neigh, bpf_fib_lookup, tcx, XDP on veth), BIG TCP, IPVS, both
iptables backends, nftables, perf events, busy polling and the cpuidle driver.
Link and program checks run in a throwaway namespace named cnb-<id>-probe that is
removed at once; nothing on the host changes. Needs root for those checks.`

// Probe runs `cnibench probe`'s checks with their throwaway namespace
// reserved in the lab state directory first (a file probe-<id>.json), so a
// probe killed half-way leaves nothing `lab clean --id <id>` does not find.
func Probe(ctx context.Context) (*probe.Report, error) {
	if os.Geteuid() != 0 {
		// No namespace can be made: the namespace checks come out
		// undecided, the rest is still answered.
		return probe.Run(ctx)
	}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("lab state dir: %w", err)
	}
	id := newID()
	res := statePath("probe-" + id)
	f, err := os.OpenFile(res, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("probe reservation: %w", err)
	}
	f.Close()
	defer os.Remove(res)
	return probe.RunIn(ctx, runid.Name(id, "probe"))
}
