package pressure

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The server end of the load: one epoll loop on one thread in the server's
// namespace. A connection that sends 'R' gets one byte back and is closed
// by the server at once (a tcp_crr transaction: the server closes first, so
// its side, not the client's, keeps the TIME_WAIT and the client's ports
// are free again at once); any other byte is echoed (a held flow's ping).

const (
	reqCRR  = 'R'
	reqPing = 'P'
	// Port is where the load's server listens inside the lab's server
	// namespace (a namespace of the run's own, so no other listener).
	Port = 7431
	// backlog is the listen queue asked for; the kernel caps it at the
	// namespace's net.core.somaxconn, which the run raises in its own
	// server namespace so the server's queue is not the first limit.
	backlog = 65535
)

// server is the load's server; serve runs it until stop is set.
type server struct {
	lfd  int
	epfd int
	stop atomic.Bool
	// accepted and closed count connections; overflow-free accepting is
	// the kernel's ListenOverflows counter, read beside.
	accepted, served atomic.Int64
}

// listen opens the listening socket in the calling thread's namespace.
func listen(addr netip.Addr) (*server, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("server socket: %w", err)
	}
	s := &server{lfd: fd, epfd: -1}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return nil, fmt.Errorf("server SO_REUSEADDR: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: Port, Addr: addr.As4()}); err != nil {
		return nil, fmt.Errorf("server bind %s:%d: %w", addr, Port, err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		return nil, fmt.Errorf("server listen: %w", err)
	}
	if s.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("server epoll: %w", err)
	}
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		return nil, fmt.Errorf("server epoll add: %w", err)
	}
	ok = true
	return s, nil
}

// serve handles connections until stop; it closes every connection it
// holds before it returns.
func (s *server) serve() error {
	conns := map[int]bool{}
	defer func() {
		for fd := range conns {
			unix.Close(fd)
		}
	}()
	evs := make([]unix.EpollEvent, 512)
	buf := make([]byte, 512)
	for !s.stop.Load() {
		n, err := unix.EpollWait(s.epfd, evs, 20)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("server epoll wait: %w", err)
		}
		for _, ev := range evs[:n] {
			fd := int(ev.Fd)
			if fd == s.lfd {
				for {
					c, _, err := unix.Accept4(s.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
					if err != nil {
						break // EAGAIN: queue empty; anything else: try at the next event
					}
					if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, c, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(c)}); err != nil {
						unix.Close(c)
						continue
					}
					conns[c] = true
					s.accepted.Add(1)
				}
				continue
			}
			m, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || m <= 0 {
				delete(conns, fd)
				unix.Close(fd) // closing removes it from the epoll set
				continue
			}
			if buf[0] == reqCRR {
				unix.Write(fd, buf[:1])
				delete(conns, fd)
				unix.Close(fd)
				s.served.Add(1)
				continue
			}
			unix.Write(fd, buf[:m]) // a ping: echoed; a short write only delays the holder's count
		}
	}
	return nil
}

func (s *server) close() {
	if s.epfd >= 0 {
		unix.Close(s.epfd)
	}
	unix.Close(s.lfd)
}
