package pressure

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/helperproc"
	"github.com/cnibench/cnibench/pkg/netns"
)

// The server runs as a child process of its own (`cnibench
// pressure-server`, hidden) in the server's namespace: each held flow is a
// socket at both ends, and a process may hold only so many descriptors (a
// hard limit that needs CAP_SYS_RESOURCE to raise, which a container often
// lacks), so the two ends get one limit each.

// ServerCommand is the hidden `cnibench pressure-server`: it listens on
// Listen:Port in its own namespace, says "ready" on out, and serves until
// in reaches its end (the parent closed it, or died).
type ServerCommand struct {
	Listen string
}

// Run serves until in ends.
func (c ServerCommand) Run(in io.Reader, out io.Writer) error {
	ip, err := netip.ParseAddr(c.Listen)
	if err != nil || !ip.Is4() {
		return fmt.Errorf("--listen %q: want an IPv4 address", c.Listen)
	}
	if _, err := raiseSoftFileLimit(); err != nil {
		return err
	}
	s, err := listen(ip)
	if err != nil {
		return err
	}
	defer s.close()
	done := make(chan error, 1)
	go func() { done <- s.serve() }()
	fmt.Fprintln(out, "ready")
	io.Copy(io.Discard, in)
	s.stop.Store(true)
	return <-done
}

// raiseSoftFileLimit raises the soft limit of open files to the hard one
// and returns it (the most sockets this process can hold).
func raiseSoftFileLimit() (uint64, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("open files limit: %w", err)
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
			return 0, fmt.Errorf("raise the open files limit to %d: %w", rl.Max, err)
		}
	}
	return rl.Max, nil
}

// serverProc is a running pressure-server.
type serverProc struct{ *helperproc.Proc }

// startServer starts the server in namespace ns and waits for its "ready".
func startServer(self, ns string, ip netip.Addr) (*serverProc, error) {
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("pressure server: %w", err)
		}
	}
	cmd := exec.Command(self, "pressure-server", "--listen", ip.String())
	hp, err := helperproc.Start(cmd, func(cmd *exec.Cmd) error { return netns.Start(ns, cmd) })
	if err != nil {
		return nil, fmt.Errorf("start pressure server in %s: %w", ns, err)
	}
	p := &serverProc{hp}
	switch err := hp.WaitReady(10 * time.Second); {
	case errors.Is(err, helperproc.ErrTimeout):
		p.stop()
		return nil, fmt.Errorf("pressure server in %s: not ready after 10s", ns)
	case err != nil:
		p.stop()
		return nil, fmt.Errorf("pressure server in %s did not start: %s", ns, hp.Stderr())
	}
	return p, nil
}

// stop ends the server: its stdin closed, then killed if it lingers.
func (p *serverProc) stop() error {
	killed, err := p.Stop(5 * time.Second)
	if killed {
		return errors.New("pressure server: killed after not stopping for 5s")
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("pressure server: %w", err)
	}
	return err
}
