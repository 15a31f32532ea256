package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/engine"
)

func newServerCmd() *cobra.Command {
	o := engine.ServerOptions{Version: Version}
	var quiet bool
	cmd := command("server", "Serve cnibench clients (TCP and UDP on one port, default 7420)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			if !quiet {
				o.Log = cmd.ErrOrStderr()
			}
			return engine.ServeCommand(cmd.Context(), o, cmd.ErrOrStderr())
		})
	cmd.Long = engine.ServeHelp
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", fmt.Sprintf(":%d", engine.DefaultPort), "ADDR:PORT to listen on (TCP and UDP)")
	f.DurationVar(&o.MaxSession, "max-session", 10*time.Minute, "longest session (warmup + duration) a client may ask for")
	f.BoolVar(&quiet, "quiet", false, "do not log sessions to stderr")
	f.StringVar(&o.Token, "token", os.Getenv(engine.TokenEnv), "secret every client must prove (default $"+engine.TokenEnv+"; prefer the variable: a flag shows in ps)")
	f.IntVar(&o.MaxSessions, "max-sessions", engine.DefaultMaxSessions, "sessions served at once; more are refused with \"server busy\"")
	f.IntVar(&o.MaxPerSource, "max-per-source", engine.DefaultMaxPerSource, "sessions served at once for one client address")
	return cmd
}
