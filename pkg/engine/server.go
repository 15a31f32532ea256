package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/sysinfo"
	"golang.org/x/sys/unix"
)

// ServerOptions configures a server.
type ServerOptions struct {
	// Listen is ADDR:PORT; an empty address means all IPv4 addresses, an
	// empty string means ":7420".
	Listen string
	// Version is cnibench's version, sent in the welcome.
	Version string
	// MaxSession bounds one client's session (setup to report); 0 means 10m.
	MaxSession time.Duration
	// FS is where /proc and /sys are read; the zero value means the host.
	FS sysinfo.FS
	// Log receives one line per session and per rejected connection; nil discards.
	Log io.Writer
	// Token, if set, is the shared secret every client must prove (auth.go).
	Token string
	// MaxSessions bounds sessions running at once; 0 means DefaultMaxSessions.
	MaxSessions int
	// MaxPerSource bounds sessions from one client address; 0 means
	// DefaultMaxPerSource.
	MaxPerSource int
	// MaxPending bounds connections that have not yet joined a session
	// (handshakes, stray or stalled peers); past it new ones are closed at
	// once. 0 means DefaultMaxPending.
	MaxPending int
}

// Defaults for the server's bounds. A session holds at most MaxParallel
// streams, each a goroutine and a socket, so these bound the server's
// goroutines, descriptors and memory whatever its peers do.
const (
	DefaultMaxSessions  = 256
	DefaultMaxPerSource = 64
	DefaultMaxPending   = 256
)

// Server serves many clients at once on one TCP and one UDP port of the same
// number. A malformed, slow or killed client ends only its own session.
type Server struct {
	o      ServerOptions
	ip     net.IP
	port   int
	tcpFD  int
	udpFD  int
	closed atomic.Bool
	env    result.Fingerprint

	mu       sync.Mutex
	sessions map[uint32]*session
	active   int            // sessions between hello and their end
	bySource map[string]int // active sessions per client IP
	pending  atomic.Int32   // connections not yet part of a session
	wg       sync.WaitGroup
}

// Listen binds the TCP and UDP sockets. A port in use is an error naming it.
func Listen(o ServerOptions) (*Server, error) {
	if o.Listen == "" {
		o.Listen = ":" + strconv.Itoa(DefaultPort)
	}
	if o.MaxSession <= 0 {
		o.MaxSession = 10 * time.Minute
	}
	if o.FS == (sysinfo.FS{}) {
		o.FS = sysinfo.Host
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxPerSource <= 0 {
		o.MaxPerSource = DefaultMaxPerSource
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	host, ps, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("bad --listen %q: want ADDR:PORT or :PORT", o.Listen)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("bad --listen %q: port must be 1-65535 (0 picks a free one)", o.Listen)
	}
	ip := net.IPv4zero
	if host != "" {
		if ip = net.ParseIP(host); ip == nil {
			return nil, fmt.Errorf("bad --listen %q: %q is not an IP address", o.Listen, host)
		}
	}
	s := &Server{o: o, ip: ip, port: port, sessions: map[uint32]*session{}, bySource: map[string]int{}}
	// TCP first: a TCP listener is exclusive, so a second server on the same
	// port fails here rather than silently sharing the SO_REUSEPORT UDP port.
	if s.tcpFD, err = listenTCP(ip, port); err != nil {
		return nil, fmt.Errorf("listen tcp %s: %w (is another server running? choose another --listen port)", o.Listen, err)
	}
	if port == 0 { // tests: take the port the kernel picked, for UDP too
		sa, err := unix.Getsockname(s.tcpFD)
		if err != nil {
			unix.Close(s.tcpFD)
			return nil, fmt.Errorf("listen tcp %s: %w", o.Listen, err)
		}
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			s.port = a.Port
		case *unix.SockaddrInet6:
			s.port = a.Port
		}
	}
	if s.udpFD, err = udpSocket(ip, s.port); err != nil {
		unix.Close(s.tcpFD)
		return nil, fmt.Errorf("listen udp %s: %w (choose another --listen port)", o.Listen, err)
	}
	_ = setTimeouts(s.udpFD, 200*time.Millisecond, 0)
	s.env = o.FS.Fingerprint(o.Version)
	return s, nil
}

// Stats is a snapshot of what the server holds, for operators (SIGUSR1 on
// `cnibench server`) and for the load tests that check it returns to its
// baseline after its peers leave.
type Stats struct {
	Sessions   int // admitted sessions (hello answered, not yet ended)
	Pending    int // connections not yet part of a session
	Goroutines int // of the whole process
}

// Stats returns the server's current counts.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	n := s.active
	s.mu.Unlock()
	return Stats{Sessions: n, Pending: int(s.pending.Load()), Goroutines: runtime.NumGoroutine()}
}

// Insecure says whether any host that reaches the server can drive it: it
// listens beyond loopback without a token.
func (s *Server) Insecure() bool { return Insecure(s.ip, s.o.Token) }

// Addr is the address the server listens on.
func (s *Server) Addr() string { return net.JoinHostPort(s.ip.String(), strconv.Itoa(s.port)) }

// Serve runs until ctx is cancelled, then ends every session and returns.
func (s *Server) Serve(ctx context.Context) error {
	done := make(chan struct{}, 2)
	go func() { s.acceptLoop(); done <- struct{}{} }()
	go func() { s.udpLoop(); done <- struct{}{} }()
	<-ctx.Done()
	s.closed.Store(true)
	// shutdown wakes a thread blocked in accept (close alone does not).
	_ = unix.Shutdown(s.tcpFD, unix.SHUT_RDWR)
	<-done
	<-done
	unix.Close(s.tcpFD)
	unix.Close(s.udpFD)
	s.mu.Lock()
	for _, ss := range s.sessions {
		ss.abort()
	}
	s.mu.Unlock()
	waited := make(chan struct{})
	go func() { s.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		return errors.New("server: sessions did not end within 5s of shutdown")
	}
	return nil
}

func (s *Server) logf(format string, a ...any) {
	fmt.Fprintf(s.o.Log, time.Now().Format("15:04:05.000")+" "+format+"\n", a...)
}

func (s *Server) session(id uint32) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// Server-side loops. Each runs on a locked OS thread with blocking calls;
// the 100 ms receive timeout only serves to notice the session's end.
