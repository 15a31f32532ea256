package cli

import (
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cnibench/cnibench/pkg/client"
	"github.com/cnibench/cnibench/pkg/engine"
	"github.com/cnibench/cnibench/pkg/result"
)

// measureFlags are the flags client and k8s run share: which tests at
// which sizes, and each one's measured and warm-up time and streams.
type measureFlags struct {
	tests, sizes     *string
	duration, warmup *time.Duration
	parallel         *int
}

func (m measureFlags) add(f *pflag.FlagSet, tests, sizes string, duration time.Duration) {
	f.StringVar(m.tests, "test", tests, "comma-separated tests: "+strings.Join(result.Tests, ","))
	f.StringVar(m.sizes, "msg-size", sizes, "comma-separated message sizes in bytes (1, 64, 1K, 4K, 64K; K = 1024); udp_bw needs at least 8")
	f.DurationVar(m.duration, "duration", duration, "measured interval per test and size")
	f.DurationVar(m.warmup, "warmup", time.Second, "traffic before the measured interval, not counted")
	f.IntVar(m.parallel, "parallel", 1, "streams or connections per test")
}

func newClientCmd() *cobra.Command {
	c := client.Command{Flags: client.Flags{Version: Version}}
	cmd := command("client", "Measure latency, connection rate and throughput against a cnibench server", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			c.PortSet = cmd.Flags().Changed("port")
			return c.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = client.Help
	cmd.Example = client.Examples
	fl := cmd.Flags()
	fl.StringVar(&c.Server, "server", "", "server: HOST, HOST:PORT or [IPv6]:PORT (required)")
	fl.IntVar(&c.Port, "port", engine.DefaultPort, "server port (TCP and UDP)")
	measureFlags{&c.Tests, &c.Sizes, &c.Duration, &c.Warmup, &c.Parallel}.add(fl, "tcp_lat", "1", 10*time.Second)
	fl.StringVar(&c.Rate, "rate", "", "udp_bw send rate in bits/s (100M, 2G); empty or 0 = unlimited")
	fl.StringVar(&c.Engine, "engine", "builtin", "builtin, or a reference tool driver (qperf, iperf3, sockperf)")
	fl.StringVar(&c.Token, "token", os.Getenv(engine.TokenEnv), "secret shared with the server (default $"+engine.TokenEnv+"; prefer the variable: a flag shows in ps)")
	addProfileFlags(cmd, &c.Profile)
	fl.StringVar(&c.ProfileDir, "profile-dir", "", "with --profile: also write each test's folded stacks to DIR/<test>-<size>.folded")
	fl.BoolVar(&c.PathMTU, "path-mtu", false, "first probe the path to the server (its MTU with don't-fragment probes, TCP's MSS) and put it in every result; built-in engine only")
	fl.BoolVar(&c.JSON, "json", false, "print one JSON document (schema "+result.SetSchemaVersion+")")
	fl.BoolVar(&c.LogStdout, "log-stdout", false, "write progress to stdout, before the result (for logs that merge both streams)")
	_ = fl.MarkHidden("log-stdout")
	return cmd
}
