// The server's front door: the TCP accept loop and the UDP socket's reader
// hand each connection or datagram to the session it belongs to, answer a
// tcp_crr connection inline, and admit or refuse a client by the limits on
// sessions per server and per source.

package engine

import (
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/cnibench/cnibench/pkg/pathmtu"
	"github.com/cnibench/cnibench/pkg/result"
	"golang.org/x/sys/unix"
)

func (s *Server) acceptLoop() {
	buf := make([]byte, preambleLen+maxCRRInline)
	for {
		fd, _, err := unix.Accept4(s.tcpFD, unix.SOCK_CLOEXEC)
		if err != nil {
			if s.closed.Load() {
				return
			}
			if err == unix.EMFILE || err == unix.ENFILE || err == unix.ENOBUFS || err == unix.ENOMEM {
				s.logf("accept: %v; pausing", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		if s.crrInline(fd, buf) {
			continue
		}
		if int(s.pending.Load()) >= s.o.MaxPending {
			// A flood of idle or stray connections must not grow the
			// server's goroutines and descriptors without bound.
			unix.Close(fd)
			continue
		}
		s.pending.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handleConn(fd)
		}()
	}
}

// maxCRRInline is the largest tcp_crr request answered on the accept thread.
const maxCRRInline = 4096

// crrInline answers a tcp_crr transaction on the accept thread when the
// whole request is already queued: the common case, and it saves a goroutine
// and a thread wake-up per connection. Only non-blocking calls are made, so
// a misbehaving client cannot stall the accept loop.
func (s *Server) crrInline(fd int, buf []byte) bool {
	n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT|unix.MSG_PEEK)
	if err != nil || n < preambleLen {
		return false
	}
	kind, sid, _, err := parsePreamble(buf[:n])
	if err != nil || kind != kindCRR {
		return false
	}
	ss := s.session(sid)
	if ss == nil || ss.setup.Test != result.TCPCRR || n != preambleLen+ss.setup.MsgSize {
		return false
	}
	if _, _, err := unix.Recvfrom(fd, buf[:n], unix.MSG_DONTWAIT); err != nil {
		return false
	}
	_, err = unix.SendmsgN(fd, ss.resp, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	unix.Close(fd)
	ss.where.samplers[0].tickShared()
	return err == nil
}

func (s *Server) handleConn(fd int) {
	joined := false
	leave := func() {
		if !joined {
			joined = true
			s.pending.Add(-1)
		}
	}
	defer leave()
	_ = setTimeouts(fd, 5*time.Second, 5*time.Second)
	var pre [preambleLen]byte
	if err := readFull(fd, pre[:]); err != nil {
		unix.Close(fd)
		return
	}
	kind, sid, stream, err := parsePreamble(pre[:])
	if err != nil {
		s.logf("rejected a connection: %v", err)
		unix.Close(fd)
		return
	}
	switch kind {
	case kindControl:
		s.control(fd, leave)
	case kindData:
		ss := s.session(sid)
		if ss == nil || !ss.attachTCP(int(stream), fd) {
			unix.Close(fd)
			return
		}
		leave() // bounded by the session's parallel streams from here on
		ss.serve(func() { ss.runTCP(int(stream), fd) })
	case kindCRR:
		ss := s.session(sid)
		if ss == nil || ss.setup.Test != result.TCPCRR {
			unix.Close(fd)
			return
		}
		req := make([]byte, ss.setup.MsgSize)
		if readFull(fd, req) == nil {
			_ = writeFull(fd, ss.resp)
		}
		unix.Close(fd)
		ss.where.samplers[0].tickShared()
	}
}

func (s *Server) udpLoop() {
	buf := make([]byte, 2048)
	for !s.closed.Load() {
		// MSG_TRUNC: n is the datagram's length, also when only its
		// start fits buf (a path MTU probe is as large as the path).
		n, from, err := unix.Recvfrom(s.udpFD, buf, unix.MSG_TRUNC)
		if err != nil || from == nil {
			continue
		}
		got := buf[:min(n, len(buf))]
		if a, ok := pathmtu.Answer(got, n); ok {
			_ = unix.Sendto(s.udpFD, a, unix.MSG_DONTWAIT, from)
			continue
		}
		sid, stream, ok := parseUDPHello(got, udpHelloMagic)
		if !ok {
			continue // not ours, or data that raced a stream's socket: dropped
		}
		ss := s.session(sid)
		if ss == nil {
			continue
		}
		ss.attachUDP(int(stream), from)
	}
}

// admit reserves a session slot for a client at src and picks the
// session's random id; a non-empty refusal says why there is none.
func (s *Server) admit(src string) (id uint32, refusal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active >= s.o.MaxSessions {
		return 0, fmt.Sprintf("server busy: %d sessions running (its --max-sessions); retry later", s.active)
	}
	if s.bySource[src] >= s.o.MaxPerSource {
		return 0, fmt.Sprintf("server busy: %d sessions from %s already (its --max-per-source); retry later", s.bySource[src], src)
	}
	for id == 0 || s.sessions[id] != nil {
		var b [4]byte
		copy(b[:], newNonce())
		id = binary.BigEndian.Uint32(b[:])
	}
	s.active++
	s.bySource[src]++
	return id, ""
}

func (s *Server) release(src string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if s.bySource[src]--; s.bySource[src] <= 0 {
		delete(s.bySource, src)
	}
}

func peerIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
