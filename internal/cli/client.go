package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/engine"
	"github.com/cnibench/cnibench/pkg/limits"
	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/units"
	"github.com/spf13/cobra"
)

// clientFlags are `cnibench client`'s flags before parsing.
type clientFlags struct {
	server, tests, sizes, rate, engine string
	token                              string
	port, parallel                     int
	portSet                            bool // --port given explicitly
	duration, warmup                   time.Duration
	json                               bool
	profile                            profileFlags
	profileDir                         string
}

// clientPlan is the validated form of clientFlags.
type clientPlan struct {
	tests []string
	sizes []int
	rate  float64
}

func (f *clientFlags) plan() (*clientPlan, error) {
	p := &clientPlan{}
	host, port, err := engine.SplitServer(f.server, f.port, f.portSet)
	if err != nil {
		return nil, err
	}
	f.server, f.port = host, port
	for _, t := range strings.Split(f.tests, ",") {
		t = strings.TrimSpace(t)
		if !result.ValidTest(t) {
			return nil, fmt.Errorf("unknown test %q in --test (known: %s)", t, strings.Join(result.Tests, ","))
		}
		p.tests = append(p.tests, t)
	}
	sizes, err := units.ParseSizes(f.sizes)
	if err != nil {
		return nil, fmt.Errorf("--msg-size: %w", err)
	}
	p.sizes = sizes
	for _, t := range p.tests {
		for _, size := range p.sizes {
			if err := limits.CheckSize(t, size); err != nil {
				return nil, fmt.Errorf("--msg-size for %s: %w", t, err)
			}
		}
	}
	if f.duration <= 0 {
		return nil, fmt.Errorf("--duration %v: must be > 0", f.duration)
	}
	if f.warmup < 0 {
		return nil, fmt.Errorf("--warmup %v: must be ≥ 0", f.warmup)
	}
	if f.parallel < 1 || f.parallel > engine.MaxParallel {
		return nil, fmt.Errorf("--parallel %d: must be 1-%d", f.parallel, engine.MaxParallel)
	}
	if f.port < 1 || f.port > 65535 {
		return nil, fmt.Errorf("--port %d: must be 1-65535", f.port)
	}
	if f.rate != "" {
		if p.rate, err = units.ParseRate(f.rate); err != nil {
			return nil, fmt.Errorf("--rate: %w", err)
		}
	}
	return p, nil
}

func newClientCmd() *cobra.Command {
	f := &clientFlags{}
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Measure latency, connection rate and throughput against a cnibench server",
		Long: `Run one or more tests against a server, one result per (test, message size).
Tests: tcp_lat udp_lat tcp_crr tcp_bw udp_bw. Sizes: 1, 64, 1K, 4K, 64K (K = 1024).
Rates (udp_bw): bits/s, 100M, 2G. --engine qperf|iperf3|sockperf measures the same
through a reference tool (its server must be running on --server).`,
		Example: `  cnibench client --server 10.0.0.2 --test tcp_lat,udp_lat --msg-size 1,1K
  cnibench client --server 10.0.0.2 --test udp_bw --msg-size 64 --rate 500M --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.portSet = cmd.Flags().Changed("port")
			p, err := f.plan()
			if err != nil {
				return UsageError{err}
			}
			prof, err := f.profile.options()
			if err != nil {
				return UsageError{err}
			}
			// A missing perf permission is found before anything is measured.
			var sess *profile.Session
			if prof != nil {
				if sess, err = profile.Open(prof.Options); err != nil {
					return fmt.Errorf("--profile: %w", err)
				}
				defer sess.Close()
			}
			set := &result.Set{Schema: result.SetSchemaVersion}
			for _, t := range p.tests {
				for _, size := range p.sizes {
					var r *result.Result
					var wp *result.WindowProfile
					if sess == nil {
						r, err = runOne(cmd.Context(), f, p, t, size)
					} else {
						r, wp, err = runProfiled(cmd.Context(), cmd.ErrOrStderr(), sess, f, p, t, size)
					}
					if err != nil {
						return err
					}
					set.Results = append(set.Results, r)
					if wp != nil {
						set.Profiles = append(set.Profiles, wp)
					}
				}
			}
			out := cmd.OutOrStdout()
			if f.json {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(set)
			}
			return printTable(out, set)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.server, "server", "", "server: HOST, HOST:PORT or [IPv6]:PORT (required)")
	fl.IntVar(&f.port, "port", engine.DefaultPort, "server port (TCP and UDP)")
	fl.StringVar(&f.tests, "test", "tcp_lat", "comma-separated tests: "+strings.Join(result.Tests, ","))
	fl.StringVar(&f.sizes, "msg-size", "1", "comma-separated message sizes in bytes (1, 64, 1K, 4K, 64K; K = 1024)")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "measured interval per test and size")
	fl.DurationVar(&f.warmup, "warmup", time.Second, "traffic before the measured interval, not counted")
	fl.IntVar(&f.parallel, "parallel", 1, "streams or connections per test")
	fl.StringVar(&f.rate, "rate", "", "udp_bw send rate in bits/s (100M, 2G); empty or 0 = unlimited")
	fl.StringVar(&f.engine, "engine", "builtin", "builtin, or a reference tool driver (qperf, iperf3, sockperf)")
	fl.StringVar(&f.token, "token", os.Getenv(engine.TokenEnv), "secret shared with the server (default $"+engine.TokenEnv+"; prefer the variable: a flag shows in ps)")
	addProfileFlags(cmd, &f.profile)
	fl.StringVar(&f.profileDir, "profile-dir", "", "with --profile: also write each test's folded stacks to DIR/<test>-<size>.folded")
	fl.BoolVar(&f.json, "json", false, "print one JSON document (schema "+result.SetSchemaVersion+")")
	return cmd
}

func runOne(ctx context.Context, f *clientFlags, p *clientPlan, test string, size int) (*result.Result, error) {
	rate := 0.0
	if test == result.UDPBW {
		rate = p.rate
	}
	if f.engine == "builtin" {
		r, err := engine.Run(ctx, engine.ClientOptions{Server: f.server, Port: f.port, Test: test, MsgSize: size,
			Parallel: f.parallel, Duration: f.duration, Warmup: f.warmup, RateBps: rate, Version: Version, Token: f.token})
		if err != nil {
			return nil, fmt.Errorf("%s %dB: %w", test, size, err)
		}
		return r, nil
	}
	return runDriver(ctx, f, test, size, rate)
}

// runDriver measures through a reference tool: build its client command,
// run it here (driver.MeasureClient: deadline, parse, client CPU), and
// return its result. The tool's server must already run on --server.
func runDriver(ctx context.Context, f *clientFlags, test string, size int, rate float64) (*result.Result, error) {
	d, err := driver.Lookup(f.engine)
	if err != nil {
		return nil, UsageError{err}
	}
	if err := d.Supports(test); err != nil {
		return nil, UsageError{err}
	}
	port := 0
	if f.port != engine.DefaultPort {
		port = f.port // the default belongs to cnibench; reference tools keep theirs
	}
	spec := driver.Spec{Server: f.server, Port: port, Test: test, MsgSize: size, Duration: f.duration,
		Warmup: f.warmup, Parallel: f.parallel, RateBps: rate}
	r, err := driver.MeasureClient(ctx, d, spec, "")
	if err != nil {
		return nil, fmt.Errorf("%s %s %dB: %w", f.engine, test, size, err)
	}
	return r, nil
}

// printTable writes the human summary: one row per result, the figures that
// apply to its test, "-" where a value is not applicable or missing.
func printTable(w io.Writer, set *result.Set) error {
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Test, sizeString(r.MsgSizeBytes), r.Parallel,
			oneWay, m("rtt_p50_us", 2), m("rtt_p99_us", 2), m("transactions_per_sec", 0),
			m("sender_mbps", 1), m("receiver_mbps", 1), m("receiver_kpps", 1), m("udp_loss_pct", 3), retr,
			m("client_cpu_pct", 1), m("server_cpu_pct", 1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range set.Results {
		if r.UDP != nil {
			fmt.Fprintf(w, "%s %s: udp sent %d received %d lost %d out-of-order %s duplicated %s", r.Test, sizeString(r.MsgSizeBytes),
				r.UDP.Sent, r.UDP.Received, r.UDP.Lost, countOrDash(r.UDP.OutOfOrder), countOrDash(r.UDP.Duplicated))
			if r.UDP.KernelRcvbufErrors != nil {
				fmt.Fprintf(w, "; server kernel RcvbufErrors %d", *r.UDP.KernelRcvbufErrors)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

func sizeString(n int) string { return units.FormatSize(n) }

// countOrDash prints a count, or "-" when it was not measured.
func countOrDash(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}
