package cli

import (
	"fmt"
	"time"

	"github.com/cnibench/cnibench/pkg/engine"
	"github.com/spf13/cobra"
)

func init() {
	register(func() *cobra.Command {
		var listen string
		var maxSession time.Duration
		var quiet bool
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
				o := engine.ServerOptions{Listen: listen, Version: Version, MaxSession: maxSession}
				if !quiet {
					o.Log = cmd.ErrOrStderr()
				}
				s, err := engine.Listen(o)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "cnibench server %s listening on %s (tcp+udp)\n", Version, s.Addr())
				return s.Serve(cmd.Context())
			},
		}
		cmd.Flags().StringVar(&listen, "listen", fmt.Sprintf(":%d", engine.DefaultPort), "ADDR:PORT to listen on (TCP and UDP)")
		cmd.Flags().DurationVar(&maxSession, "max-session", 10*time.Minute, "longest session (warmup + duration) a client may ask for")
		cmd.Flags().BoolVar(&quiet, "quiet", false, "do not log sessions to stderr")
		return cmd
	})
}
