package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/cnibench/cnibench/pkg/engine"
	"github.com/spf13/cobra"
)

func newServerCmd() *cobra.Command {
	var listen string
	var maxSession time.Duration
	var quiet bool
	var token string
	var maxSessions, maxPerSource int
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve cnibench clients (TCP and UDP on one port, default 7420)",
		Long: `Serve cnibench clients until interrupted. TCP and UDP use the same port number,
so one Kubernetes Service port or firewall rule covers every test. Many clients can
run at once; each session is bounded by --max-session.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxSession <= 0 {
				return UsageError{fmt.Errorf("--max-session %v: must be > 0", maxSession)}
			}
			if maxSessions < 1 || maxPerSource < 1 {
				return UsageError{fmt.Errorf("--max-sessions %d / --max-per-source %d: must be ≥ 1", maxSessions, maxPerSource)}
			}
			o := engine.ServerOptions{Listen: listen, Version: Version, MaxSession: maxSession,
				Token: token, MaxSessions: maxSessions, MaxPerSource: maxPerSource}
			if !quiet {
				o.Log = cmd.ErrOrStderr()
			}
			s, err := engine.Listen(o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "cnibench server %s listening on %s (tcp+udp)\n", Version, s.Addr())
			if s.Insecure() {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: listening beyond loopback without a token: any host that reaches %s can run tests; set $%s (or --token) on server and clients\n", s.Addr(), engine.TokenEnv)
			}
			defer s.StatsOnSIGUSR1(cmd.ErrOrStderr())()
			return s.Serve(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", fmt.Sprintf(":%d", engine.DefaultPort), "ADDR:PORT to listen on (TCP and UDP)")
	cmd.Flags().DurationVar(&maxSession, "max-session", 10*time.Minute, "longest session (warmup + duration) a client may ask for")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "do not log sessions to stderr")
	cmd.Flags().StringVar(&token, "token", os.Getenv(engine.TokenEnv), "secret every client must prove (default $"+engine.TokenEnv+"; prefer the variable: a flag shows in ps)")
	cmd.Flags().IntVar(&maxSessions, "max-sessions", engine.DefaultMaxSessions, "sessions served at once; more are refused with \"server busy\"")
	cmd.Flags().IntVar(&maxPerSource, "max-per-source", engine.DefaultMaxPerSource, "sessions served at once for one client address")
	return cmd
}
