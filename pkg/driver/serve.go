package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/result"
)

// Server is one process of a tool's server side, as a long-lived server
// (a Kubernetes server pod) runs it: its argv and the tests it serves.
type Server struct {
	Argv  []string
	Tests []string
	// UDPOnly: every test it serves is a UDP test, so it binds no TCP port
	// (sockperf's UDP server); its readiness is a bound UDP port.
	UDPOnly bool
}

func isUDP(test string) bool { return test == result.UDPLat || test == result.UDPBW }

// defaultPort is port, or d's own default when port is 0: the port the
// lab's Measure gives a server (prepare), so the commands are the lab's.
func defaultPort(d Driver, port int) int {
	if port == 0 {
		if dp, ok := d.(DefaultPorter); ok {
			return dp.DefaultPort()
		}
	}
	return port
}

// Servers returns the processes that serve every test d supports on port
// (the tool's default when 0), one per distinct server command, each
// persistent: qperf needs one for all its tests, iperf3 one, sockperf one
// for TCP and one for UDP. The commands are d's own ServerCommand, with the
// port given as the lab's Measure gives it.
func Servers(d Driver, port int) ([]Server, error) {
	port = defaultPort(d, port)
	var out []Server
	for _, t := range result.Tests {
		if d.Supports(t) != nil {
			continue
		}
		argv, err := d.ServerCommand(Spec{Test: t, Port: port, Persistent: true})
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(out, func(s Server) bool { return slices.Equal(s.Argv, argv) })
		if i < 0 {
			out = append(out, Server{Argv: argv, UDPOnly: true})
			i = len(out) - 1
		}
		out[i].Tests = append(out[i].Tests, t)
		out[i].UDPOnly = out[i].UDPOnly && isUDP(t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no test to serve", d.Name())
	}
	return out, nil
}

// Serve runs d's servers (Servers) on port until ctx ends, then stops them
// by process group. It writes one line per server to log once that server
// has bound its port. A server that exits, or does not bind in
// ReadyTimeout, ends Serve with an error naming its command and its last
// words; the others are stopped. A tool missing from $PATH is an error
// matching ErrNotInstalled before anything starts.
func Serve(ctx context.Context, d Driver, port int, log io.Writer) error {
	if err := d.Installed(); err != nil {
		return err
	}
	servers, err := Servers(d, port)
	if err != nil {
		return err
	}
	port = defaultPort(d, port)
	var procs []*process
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	exited := make(chan int, len(servers))
	for i, s := range servers {
		p, err := startProcess(nil, "", nil, s.Argv, nil)
		if err != nil {
			return fmt.Errorf("start %s: %w", strings.Join(s.Argv, " "), err)
		}
		procs = append(procs, p)
		go func() { <-p.done; exited <- i }()
		if err := p.waitListening(ctx, port, s.UDPOnly, ReadyTimeout); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%s: %w", strings.Join(s.Argv, " "), err)
		}
		fmt.Fprintf(log, "serving %s on port %d: %s\n", strings.Join(s.Tests, ","), port, strings.Join(s.Argv, " "))
	}
	select {
	case <-ctx.Done():
		return nil
	case i := <-exited:
		p := procs[i]
		return fmt.Errorf("%s exited (%v): %s", strings.Join(servers[i].Argv, " "), p.waitErr, tailLine(p.stderr.String()))
	}
}

// ErrInvalid is matched (errors.Is) by ToolServer's errors about its
// options, which the user fixes by changing the command line.
var ErrInvalid = errors.New("invalid tool server options")

// ToolServer is what a reference tool's server pod runs (`cnibench k8s
// tool-server`): the engine's own server commands, as the lab's Measure
// runs them, until ctx ends. With Check it is the pod's startup probe
// instead: nil once every one of those servers has bound its port in this
// thread's network namespace (no connection is made; /proc/self/net would
// be the main thread's namespace).
type ToolServer struct {
	Engine string // qperf, iperf3 or sockperf
	Port   int    // 0: the tool's own default
	Check  bool
}

// Run serves, writing Serve's lines to log, or checks. A tool missing from
// this image is an error (matching ErrNotInstalled) saying how to build
// one that has it.
func (c ToolServer) Run(ctx context.Context, log io.Writer) error {
	d, err := Lookup(c.Engine)
	if err != nil || c.Engine == "builtin" {
		return errkind.Errorf(ErrInvalid, "--engine %q: want qperf, iperf3 or sockperf", c.Engine)
	}
	if c.Check {
		return Listening(d, c.Port, "/proc/thread-self/net")
	}
	err = Serve(ctx, d, c.Port, log)
	if errors.Is(err, ErrNotInstalled) {
		// The pod's log ends with this line; k8s run shows it.
		return errkind.Errorf(ErrNotInstalled, "%s is not in this image (PATH=%s): build the image with `cnibench image build --with-tools` on a host that has %s, load it on every node and run again", c.Engine, os.Getenv("PATH"), c.Engine)
	}
	return err
}

// ErrNotListening is wrapped by Listening's error for a server whose port
// is not bound yet.
var ErrNotListening = errors.New("not listening")

// Listening returns nil when every server of d (Servers) has bound port in
// the network namespace whose /proc/net tables are under procNet (e.g.
// /proc/thread-self/net, this thread's): TCP in LISTEN, or the UDP port for
// a UDP-only server. It opens no connection, so it can be a probe that
// disturbs no measurement.
func Listening(d Driver, port int, procNet string) error {
	servers, err := Servers(d, port)
	if err != nil {
		return err
	}
	port = defaultPort(d, port)
	for _, s := range servers {
		proto := "tcp"
		if s.UDPOnly {
			proto = "udp"
		}
		bound := false
		for _, table := range []string{proto, proto + "6"} {
			b, err := os.ReadFile(filepath.Join(procNet, table))
			if errors.Is(err, os.ErrNotExist) {
				continue // no IPv6
			}
			if err != nil {
				return err
			}
			bound = bound || ParseProcNetBound(b, port, proto == "tcp")
		}
		if !bound {
			return fmt.Errorf("%s: %w on %s port %d", strings.Join(s.Argv, " "), ErrNotListening, proto, port)
		}
	}
	return nil
}
