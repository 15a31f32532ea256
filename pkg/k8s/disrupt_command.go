package k8s

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/disrupt"
	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/store"
)

// DisruptCommand is `cnibench k8s disrupt` as given.
type DisruptCommand struct {
	Cluster ClusterFlags
	// Probes is "udp-rr=1000,tcp-crr=200": each probe, its rate optional.
	Probes  string
	Timeout time.Duration
	Target  string
	// Services is the filler count; Events a comma list of DisruptEvents.
	Services, Repeats                   int
	Events                              string
	Settle, Spacing, Bucket, StartDelay time.Duration
	// BlackholeFor is each blackhole event's length.
	BlackholeFor                              time.Duration
	Agent, RestartCmd, ClientNode, ServerNode string
	Arm, Against, JSON, HTML                  string
	ReadyTimeout                              time.Duration
	Keep                                      bool
	Version, Experiment                       string
	// DBPath is the results database the run is stored in, as `disrupt
	// run` stores its own (disrupt.Save), under kind KindDisrupt.
	DBPath string
}

// ParseDisruptProbes reads --probes: a comma list of KIND[=RATE].
func ParseDisruptProbes(s string, timeout time.Duration) ([]disrupt.ProbeSpec, error) {
	var out []disrupt.ProbeSpec
	for _, f := range strings.Split(s, ",") {
		kind, rate, hasRate := strings.Cut(strings.TrimSpace(f), "=")
		p := disrupt.ProbeSpec{Kind: disrupt.ProbeKind(kind), Rate: disrupt.DefaultUDPRate, Timeout: timeout}
		if p.Kind == disrupt.TCPCRR {
			p.Rate = disrupt.DefaultCRRRate
		}
		if hasRate {
			v, err := strconv.ParseFloat(rate, 64)
			if err != nil {
				return nil, errkind.Errorf(ErrInvalid, "--probes %q: rate %q is not a number (write udp-rr=1000)", s, rate)
			}
			p.Rate = v
		}
		if err := p.Check(); err != nil {
			return nil, errkind.Errorf(ErrInvalid, "--probes %q: %v", s, err)
		}
		if slices.ContainsFunc(out, func(q disrupt.ProbeSpec) bool { return q.Kind == p.Kind }) {
			return nil, errkind.Errorf(ErrInvalid, "--probes %q: %s twice", s, p.Kind)
		}
		out = append(out, p)
	}
	return out, nil
}

// Options checks every flag (each error an ErrInvalid, before the cluster
// is contacted) and returns the run's options, the cluster's part left to
// Run.
func (c DisruptCommand) Options() (DisruptOptions, error) {
	// Left zero by the CLI: the defaults (a pod that takes longer than
	// 20 s to start is one whose image is pulled, not a disruption).
	c.Bucket = cmp.Or(c.Bucket, 100*time.Millisecond)
	c.StartDelay = cmp.Or(c.StartDelay, 20*time.Second)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, 2*time.Minute)
	probes, err := ParseDisruptProbes(c.Probes, c.Timeout)
	if err != nil {
		return DisruptOptions{}, err
	}
	var events []string
	for _, e := range strings.Split(c.Events, ",") {
		e = strings.TrimSpace(e)
		if !slices.Contains(DisruptEvents, e) {
			return DisruptOptions{}, errkind.Errorf(ErrInvalid, "--events: %q is not an event; want a comma list of %s", e, strings.Join(DisruptEvents, ", "))
		}
		events = append(events, e)
	}
	sel, knownAgent := DisruptAgents[c.Agent]
	bad := func(format string, a ...any) (DisruptOptions, error) {
		return DisruptOptions{}, errkind.Errorf(ErrInvalid, format, a...)
	}
	switch {
	case c.Target != DisruptTargetPod && c.Target != DisruptTargetService:
		return bad("--target %q: want pod or service", c.Target)
	case c.Services < 0 || c.Services > MaxServices:
		return bad("--services %d: must be 0-%d", c.Services, MaxServices)
	case slices.Contains(events, EndpointChange) && c.Services < 1:
		return bad("--events endpoint-change moves a filler Service's endpoint: give --services 1 or more")
	case c.Repeats < 1 || c.Repeats*len(events) > maxDisruptEvents:
		return bad("--repeats %d: want 1 or more, at most %d firings in all (%d events a round)", c.Repeats, maxDisruptEvents, len(events))
	case c.Bucket < 10*time.Millisecond || c.Bucket > 10*time.Second:
		return bad("--bucket %s: want 10ms to 10s", c.Bucket)
	case c.Spacing < 2*c.Timeout || c.Spacing < time.Second:
		return bad("--spacing %s: want at least 1s and twice the probe timeout (%s), so each event has its own window", c.Spacing, c.Timeout)
	case c.Settle < time.Second:
		return bad("--settle %s: the probes need at least 1s before the first event (the baseline)", c.Settle)
	case c.StartDelay < time.Second:
		return bad("--start-delay %s: want at least 1s for the probe pods to start", c.StartDelay)
	case !knownAgent && slices.Contains(events, AgentRestart) && c.RestartCmd == "":
		return bad("--agent %q: want one of kube-proxy, flannel, cilium (or give --restart-cmd)", c.Agent)
	case c.RestartCmd != "" && !slices.Contains(events, AgentRestart):
		return bad("--restart-cmd is for --events agent-restart")
	case slices.Contains(events, Blackhole) && (c.BlackholeFor < 10*time.Millisecond || c.BlackholeFor >= c.Spacing/2):
		return bad("--blackhole %s: want at least 10ms and less than half the spacing (%s)", c.BlackholeFor, c.Spacing/2)
	}
	return DisruptOptions{Probes: probes, Target: c.Target, Services: c.Services, Events: events, Repeats: c.Repeats,
		Settle: c.Settle, Spacing: c.Spacing, Bucket: c.Bucket, StartDelay: c.StartDelay, AgentSelector: sel,
		RestartCmd: c.RestartCmd, BlackholeFor: c.BlackholeFor, ClientNode: c.ClientNode, ServerNode: c.ServerNode, Arm: c.Arm,
		ReadyTimeout: c.ReadyTimeout, Keep: c.Keep}, nil
}

// Run checks the flags, runs the arm on the flags' cluster, adds it to the
// --against result's arms (compared with its baseline) and prints the
// text report to out and the files asked for.
func (c DisruptCommand) Run(ctx context.Context, out, log io.Writer) error {
	o, err := c.Options()
	if err != nil {
		return err
	}
	res := &disrupt.Result{Schema: disrupt.Schema, Name: "k8s-disrupt", Started: time.Now().UTC(), Spec: c.Experiment,
		Description: fmt.Sprintf("%s × %d through the %s, %d filler Services", strings.Join(o.Events, ", "), o.Repeats, o.Target, o.Services)}
	if c.Against != "" {
		prev, err := disrupt.ReadResult(c.Against)
		if err != nil {
			return fmt.Errorf("--against: %w", err)
		}
		res.Arms, res.Baseline = prev.Arms, prev.Baseline
	}
	if o.Image, o.PullPolicy, err = c.Cluster.ResolveImage(c.Version); err != nil {
		return err
	}
	// Opened before the cluster is touched: a database that cannot be
	// opened stops the run here, not after minutes of probing.
	db, err := store.Open(c.DBPath)
	if err != nil {
		return err
	}
	defer db.Close()
	o.Namespace, o.Log = c.Cluster.Namespace, log
	podDefaults(&o.Namespace, &o.PullPolicy, &o.Log)
	conn, cl, nodes, err := c.Cluster.ConnectFor(ctx, o.Namespace, o.Services)
	if err != nil {
		return err
	}
	o.OnProbed = func(cl *Cluster) error {
		name := o.Arm
		if name == "" {
			name = DisruptArmName(cl)
		}
		if slices.ContainsFunc(res.Arms, func(a *disrupt.ArmResult) bool { return a.Name == name }) {
			return errkind.Errorf(ErrInvalid, "--against %s already has an arm %q: name this run's with --arm", c.Against, name)
		}
		return nil
	}
	r := &Runner{Client: conn.Client, Bulk: conn.Bulk, RunID: runid.New()}
	arm, runErr := r.Disrupt(ctx, cl, nodes, o)
	if arm == nil {
		return runErr
	}
	res.Arms = append(res.Arms, arm)
	if res.Baseline == "" {
		res.Baseline = arm.Name
	}
	res.Comparisons = disrupt.Compare(res)
	errs := []error{runErr, disrupt.WriteText(out, res), disrupt.WriteFiles(res, c.JSON, c.HTML)}
	// Stored last: a database that fails loses nothing already printed
	// or written, and says so.
	if disrupt.Measured(res) {
		run, err := disrupt.Save(db, res, disrupt.StoreOptions{Kind: KindDisrupt, Version: c.Version, Host: clusterFingerprint(cl, c.Version), Err: runErr})
		if err != nil {
			errs = append(errs, fmt.Errorf("k8s disrupt: the result was not stored in %s: %w", db.Path(), err))
		} else {
			fmt.Fprintf(log, "stored as run %d (%s) in %s; read it back with: cnibench disrupt report %s\n", run.ID, run.Name, db.Path(), run.Name)
		}
	}
	return errors.Join(errs...)
}

// KindDisrupt is the stored kind of `cnibench k8s disrupt`'s runs.
const KindDisrupt = "k8s-disrupt"
