// Package client is `cnibench client`: every (test, message size) of a
// plan measured against a running server, with the built-in engine or a
// reference tool's driver, each test's measured window optionally sampled
// by the profiler. The command line only fills Flags.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	// The engines --engine can name; each registers itself with the driver
	// registry.
	_ "github.com/cnibench/cnibench/pkg/driver/builtin"
	_ "github.com/cnibench/cnibench/pkg/driver/iperf3"
	_ "github.com/cnibench/cnibench/pkg/driver/qperf"
	_ "github.com/cnibench/cnibench/pkg/driver/sockperf"
	"github.com/cnibench/cnibench/pkg/engine"
	"github.com/cnibench/cnibench/pkg/limits"
	"github.com/cnibench/cnibench/pkg/pathmtu"
	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/units"
)

// ErrInvalid is wrapped by every error Flags.Plan returns: the flags, not
// the network, are wrong.
var ErrInvalid = errors.New("invalid client flags")

// Flags are the client's settings as given.
type Flags struct {
	Server, Tests, Sizes, Rate, Engine string
	Token                              string
	Port, Parallel                     int
	PortSet                            bool // --port given explicitly
	Duration, Warmup                   time.Duration
	// ProfileDir, with a profiler, also gets each test's folded stacks.
	ProfileDir string
	// PathMTU probes the path to the server first (pkg/pathmtu: its MTU
	// and TCP's MSS) and puts it in every result; built-in engine only.
	PathMTU bool
	Version string // sent to the server
}

// Plan is Flags checked: every value typed and able to run.
type Plan struct {
	Flags
	Tests   []string
	Sizes   []int
	RateBps float64
	driver  driver.Driver // nil: the built-in engine
}

type invalid struct{ err error }

func (e invalid) Error() string { return e.err.Error() }
func (e invalid) Unwrap() []error {
	return []error{e.err, ErrInvalid}
}

func bad(format string, a ...any) error { return invalid{fmt.Errorf(format, a...)} }

// Plan checks the flags: server address, tests, sizes (for every test),
// duration, warmup, parallelism, port, rate and that the engine can run
// every test.
func (f Flags) Plan() (*Plan, error) {
	p := &Plan{Flags: f}
	host, port, err := engine.SplitServer(f.Server, f.Port, f.PortSet)
	if err != nil {
		return nil, invalid{err}
	}
	p.Server, p.Port = host, port
	for _, t := range strings.Split(f.Tests, ",") {
		t = strings.TrimSpace(t)
		if !result.ValidTest(t) {
			return nil, bad("unknown test %q in --test (known: %s)", t, strings.Join(result.Tests, ","))
		}
		p.Tests = append(p.Tests, t)
	}
	if p.Sizes, err = units.ParseSizes(f.Sizes); err != nil {
		return nil, bad("--msg-size: %w", err)
	}
	for _, t := range p.Tests {
		for _, size := range p.Sizes {
			if err := limits.CheckSize(t, size); err != nil {
				return nil, bad("--msg-size for %s: %w", t, err)
			}
		}
	}
	switch {
	case f.Duration <= 0:
		return nil, bad("--duration %v: must be > 0", f.Duration)
	case f.Warmup < 0:
		return nil, bad("--warmup %v: must be ≥ 0", f.Warmup)
	case f.Parallel < 1 || f.Parallel > engine.MaxParallel:
		return nil, bad("--parallel %d: must be 1-%d", f.Parallel, engine.MaxParallel)
	case p.Port < 1 || p.Port > 65535:
		return nil, bad("--port %d: must be 1-65535", p.Port)
	}
	if f.Rate != "" {
		if p.RateBps, err = units.ParseRate(f.Rate); err != nil {
			return nil, bad("--rate: %w", err)
		}
	}
	if f.PathMTU && f.Engine != "builtin" {
		return nil, bad("--path-mtu: the probes are answered by a cnibench server; engine %s's server does not answer them", f.Engine)
	}
	if f.Engine != "builtin" {
		if p.driver, err = driver.Lookup(f.Engine); err != nil {
			return nil, invalid{err}
		}
		for _, t := range p.Tests {
			if err := p.driver.Supports(t); err != nil {
				return nil, invalid{err}
			}
		}
	}
	return p, nil
}

// Run measures every test at every size, in order. With sess, each test's
// measured window is profiled and its CPU by stage printed to log.
func Run(ctx context.Context, p *Plan, sess *profile.Session, log io.Writer) (*result.Set, error) {
	set := &result.Set{Schema: result.SetSchemaVersion}
	var path *result.PathMTU
	if p.PathMTU {
		path = p.probePath(ctx, log)
	}
	for _, t := range p.Tests {
		for _, size := range p.Sizes {
			var r *result.Result
			var wp *result.WindowProfile
			var err error
			if sess == nil {
				r, err = p.one(ctx, t, size)
			} else {
				r, wp, err = p.profiled(ctx, log, sess, t, size)
			}
			if err != nil {
				return nil, err
			}
			r.PathMTU = path
			set.Results = append(set.Results, r)
			if wp != nil {
				set.Profiles = append(set.Profiles, wp)
			}
		}
	}
	return set, nil
}

func (p *Plan) one(ctx context.Context, test string, size int) (*result.Result, error) {
	rate := 0.0
	if test == result.UDPBW {
		rate = p.RateBps
	}
	if p.driver == nil {
		r, err := engine.Run(ctx, engine.ClientOptions{Server: p.Server, Port: p.Port, Test: test, MsgSize: size,
			Parallel: p.Parallel, Duration: p.Duration, Warmup: p.Warmup, RateBps: rate, Version: p.Version, Token: p.Token})
		if err != nil {
			return nil, fmt.Errorf("%s %dB: %w", test, size, err)
		}
		return r, nil
	}
	// A reference tool: build its client command, run it here
	// (driver.MeasureClient: deadline, parse, client CPU). Its server must
	// already run on --server.
	port := 0
	if p.Port != engine.DefaultPort {
		port = p.Port // the default belongs to cnibench; reference tools keep theirs
	}
	spec := driver.Spec{Server: p.Server, Port: port, Test: test, MsgSize: size, Duration: p.Duration,
		Warmup: p.Warmup, Parallel: p.Parallel, RateBps: rate}
	r, err := driver.MeasureClient(ctx, p.driver, spec, "")
	if err != nil {
		return nil, fmt.Errorf("%s %s %dB: %w", p.Engine, test, size, err)
	}
	if r.Tool.Version == "" {
		if v, err := p.driver.Version(); err == nil {
			r.Tool.Version = v
		} else {
			r.SetMissing("tool.version", err.Error())
		}
	}
	return r, nil
}

// profiled runs one test with the CPUs sampled from the end of its warmup
// for its duration (the client starts its warmup as it is called), then
// prints the window's CPU by stage to w (standard error, so --json output
// stays one document). The window's profile rides in the result set (a
// Kubernetes client pod's only way out is its log).
func (p *Plan) profiled(ctx context.Context, w io.Writer, sess *profile.Session, test string, size int) (*result.Result, *result.WindowProfile, error) {
	var (
		mu      sync.Mutex
		started bool
		prof    *profile.Profile
		perr    error
	)
	stop := func() {
		if started && prof == nil && perr == nil {
			prof, perr = sess.Stop()
		}
	}
	t1 := time.AfterFunc(p.Warmup, func() {
		mu.Lock()
		defer mu.Unlock()
		if prof == nil && perr == nil {
			if perr = sess.Start(); perr == nil {
				started = true
			}
		}
	})
	t2 := time.AfterFunc(p.Warmup+p.Duration, func() {
		mu.Lock()
		defer mu.Unlock()
		stop()
	})
	r, err := p.one(ctx, test, size)
	t1.Stop()
	t2.Stop()
	mu.Lock()
	defer mu.Unlock()
	stop()
	if err != nil {
		return nil, nil, err
	}
	wp := &result.WindowProfile{Test: test, MsgSizeBytes: size}
	if prof == nil {
		reason := "the test ended before its warmup did"
		if perr != nil {
			reason = perr.Error()
		}
		fmt.Fprintf(w, "%s %s: no profile: %s\n", test, units.FormatSize(size), reason)
		wp.Missing = reason
		return r, wp, nil
	}
	// Bounded like one repeat of a stored cell (1 MiB over 8 repeats), so
	// a Kubernetes pod's log stays small; only stack depth is lost.
	profile.Bound(prof.Stacks, profile.MaxCellBytes/8)
	var folded strings.Builder
	if err := profile.WriteFolded(&folded, prof.Stacks); err != nil {
		return nil, nil, err
	}
	if p.ProfileDir != "" {
		path := filepath.Join(p.ProfileDir, fmt.Sprintf("%s-%s.folded", test, units.FormatSize(size)))
		if err := os.WriteFile(path, []byte(folded.String()), 0o644); err != nil {
			return nil, nil, fmt.Errorf("--profile-dir: %w", err)
		}
	}
	wp.Event, wp.FrequencyHz, wp.CPUs, wp.WindowNs = string(prof.Event), prof.Frequency, prof.CPUs, prof.WindowNs
	wp.Samples, wp.Lost, wp.PeriodSum, wp.Folded = prof.Samples, prof.Lost, prof.PeriodSum, folded.String()
	sp := &store.Profile{Seq: 0, Event: string(prof.Event), Frequency: prof.Frequency, CPUs: prof.CPUs, WindowNs: prof.WindowNs,
		Samples: prof.Samples, Lost: prof.Lost, PeriodSum: prof.PeriodSum, Folded: folded.String()}
	cells, err := stages.Cells([]store.Sample{{Arm: "client", Test: test, MsgSize: size, Result: r}}, map[int]*store.Profile{0: sp})
	if err != nil {
		return nil, nil, err
	}
	(&stages.Report{Cells: cells}).WriteText(w)
	return r, wp, nil
}

// WriteTable writes the human summary: one row per result, the figures
// that apply to its test, "-" where a value is not applicable or missing.
func WriteTable(w io.Writer, set *result.Set) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "test\tsize\tpar\tone-way mean us\trtt p50 us\trtt p99 us\ttxn/s\tsend Mb/s\trecv Mb/s\trecv kpps\tloss %\tretrans\tcli cpu %\tsrv cpu %\t")
	for _, r := range set.Results {
		m := func(name string, prec int) string {
			if v, ok := result.Metrics[name].Get(r); ok {
				return fmt.Sprintf("%.*f", prec, v)
			}
			return "-"
		}
		oneWay := m("one_way_mean_us", 2)
		if r.Test == result.TCPCRR { // RTT/2 of connect..close means nothing
			oneWay = "-"
		}
		retr := "-"
		if r.TCP != nil && r.TCP.Retransmits != nil {
			retr = fmt.Sprint(*r.TCP.Retransmits)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Test, units.FormatSize(r.MsgSizeBytes), r.Parallel,
			oneWay, m("rtt_p50_us", 2), m("rtt_p99_us", 2), m("transactions_per_sec", 0),
			m("sender_mbps", 1), m("receiver_mbps", 1), m("receiver_kpps", 1), m("udp_loss_pct", 3), retr,
			m("client_cpu_pct", 1), m("server_cpu_pct", 1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range set.Results {
		if r.UDP != nil {
			fmt.Fprintf(w, "%s %s: udp sent %d received %d lost %d out-of-order %s duplicated %s", r.Test, units.FormatSize(r.MsgSizeBytes),
				r.UDP.Sent, r.UDP.Received, r.UDP.Lost, countOrDash(r.UDP.OutOfOrder), countOrDash(r.UDP.Duplicated))
			if r.UDP.KernelRcvbufErrors != nil {
				fmt.Fprintf(w, "; server kernel RcvbufErrors %d", *r.UDP.KernelRcvbufErrors)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// countOrDash prints a count, or "-" when it was not measured.
func countOrDash(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

// probePath probes the path to the server (its UDP port answers) and says
// what it found on log; a path that could not be probed is returned with
// the reason, and the tests run all the same.
func (p *Plan) probePath(ctx context.Context, log io.Writer) *result.PathMTU {
	host := p.Server
	if net.ParseIP(host) == nil {
		if ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", host); err == nil && len(ips) > 0 {
			host = ips[0].String()
		}
	}
	target := net.JoinHostPort(host, strconv.Itoa(p.Port))
	path, err := pathmtu.Probe(ctx, pathmtu.Options{Target: target})
	if path == nil {
		path = &result.PathMTU{Target: target}
		path.SetMissing("mtu", err.Error())
	}
	fmt.Fprintf(log, "path to %s: %s\n", target, path.Summary())
	return path
}
