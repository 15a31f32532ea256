package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/client"
	"github.com/cnibench/cnibench/pkg/engine"
	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/result"
)

func newClientCmd() *cobra.Command {
	f := client.Flags{Version: Version}
	var prof profileFlags
	var asJSON, logStdout bool
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
			f.PortSet = cmd.Flags().Changed("port")
			p, err := f.Plan()
			if err != nil {
				return UsageError{err}
			}
			po, err := prof.options()
			if err != nil {
				return UsageError{err}
			}
			// A missing perf permission is found before anything is measured.
			var sess *profile.Session
			if po != nil {
				if sess, err = profile.Open(*po); err != nil {
					return fmt.Errorf("--profile: %w", err)
				}
				defer sess.Close()
			}
			logw := cmd.ErrOrStderr()
			if logStdout {
				logw = cmd.OutOrStdout()
			}
			set, err := client.Run(cmd.Context(), p, sess, logw)
			if err != nil {
				return err
			}
			if asJSON {
				return report.WriteJSON(cmd.OutOrStdout(), set)
			}
			return client.WriteTable(cmd.OutOrStdout(), set)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Server, "server", "", "server: HOST, HOST:PORT or [IPv6]:PORT (required)")
	fl.IntVar(&f.Port, "port", engine.DefaultPort, "server port (TCP and UDP)")
	fl.StringVar(&f.Tests, "test", "tcp_lat", "comma-separated tests: "+strings.Join(result.Tests, ","))
	fl.StringVar(&f.Sizes, "msg-size", "1", "comma-separated message sizes in bytes (1, 64, 1K, 4K, 64K; K = 1024)")
	fl.DurationVar(&f.Duration, "duration", 10*time.Second, "measured interval per test and size")
	fl.DurationVar(&f.Warmup, "warmup", time.Second, "traffic before the measured interval, not counted")
	fl.IntVar(&f.Parallel, "parallel", 1, "streams or connections per test")
	fl.StringVar(&f.Rate, "rate", "", "udp_bw send rate in bits/s (100M, 2G); empty or 0 = unlimited")
	fl.StringVar(&f.Engine, "engine", "builtin", "builtin, or a reference tool driver (qperf, iperf3, sockperf)")
	fl.StringVar(&f.Token, "token", os.Getenv(engine.TokenEnv), "secret shared with the server (default $"+engine.TokenEnv+"; prefer the variable: a flag shows in ps)")
	addProfileFlags(cmd, &prof)
	fl.StringVar(&f.ProfileDir, "profile-dir", "", "with --profile: also write each test's folded stacks to DIR/<test>-<size>.folded")
	fl.BoolVar(&asJSON, "json", false, "print one JSON document (schema "+result.SetSchemaVersion+")")
	// A pod's log merges stdout and stderr read from two pipes, so a
	// progress line written just before the JSON can land inside it; k8s
	// run's client pods send both through stdout, in order.
	fl.BoolVar(&logStdout, "log-stdout", false, "write progress to stdout, before the result (for logs that merge both streams)")
	_ = fl.MarkHidden("log-stdout")
	return cmd
}
