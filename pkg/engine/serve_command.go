package engine

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cnibench/cnibench/pkg/errkind"
)

// ErrInvalid is matched (errors.Is) by ServeCommand's errors about the
// server's flags: the command line, not the host, is wrong.
var ErrInvalid = errors.New("invalid server flags")

// ServeHelp is `cnibench server --help`'s description.
const ServeHelp = `Serve cnibench clients until interrupted. TCP and UDP use the same port number,
so one Kubernetes Service port or firewall rule covers every test. Many clients can
run at once; each session is bounded by --max-session.`

// ServeCommand is `cnibench server`: it checks the bounds the user gave (a
// zero there is a mistake, not "the default"), listens, says where on log
// (warning when it listens beyond loopback without a token), prints its
// counters on SIGUSR1, and serves until ctx ends. Sessions are logged to
// o.Log.
func ServeCommand(ctx context.Context, o ServerOptions, log io.Writer) error {
	if o.MaxSession <= 0 {
		return errkind.Errorf(ErrInvalid, "--max-session %v: must be > 0", o.MaxSession)
	}
	if o.MaxSessions < 1 || o.MaxPerSource < 1 {
		return errkind.Errorf(ErrInvalid, "--max-sessions %d / --max-per-source %d: must be ≥ 1", o.MaxSessions, o.MaxPerSource)
	}
	s, err := Listen(o)
	if err != nil {
		return err
	}
	// The handler goes in before the announcement: whoever waits for
	// "listening on" may signal at once, and a SIGUSR1 that came before
	// signal.Notify would be lost.
	defer s.StatsOnSIGUSR1(log)()
	fmt.Fprintf(log, "cnibench server %s listening on %s (tcp+udp)\n", o.Version, s.Addr())
	if s.Insecure() {
		fmt.Fprintf(log, "warning: listening beyond loopback without a token: any host that reaches %s can run tests; set $%s (or --token) on server and clients\n", s.Addr(), TokenEnv)
	}
	return s.Serve(ctx)
}
