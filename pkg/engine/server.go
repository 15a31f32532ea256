package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cnibench/cnibench/pkg/limits"
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
		n, from, err := unix.Recvfrom(s.udpFD, buf, 0)
		if err != nil || from == nil {
			continue
		}
		sid, stream, ok := parseUDPHello(buf[:n], udpHelloMagic)
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

// control runs one client's session on its control connection. leave is
// called once the connection has become a counted session.
func (s *Server) control(fd int, leave func()) {
	f := os.NewFile(uintptr(fd), "control")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return
	}
	defer c.Close()
	peer := c.RemoteAddr().String()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	h, err := readMsg(c, msgHello)
	if err != nil {
		s.logf("%s: bad hello: %v", peer, err)
		return
	}
	if h.Proto != ProtoVersion {
		ve := &VersionError{Client: h.Proto, Server: ProtoVersion, ClientVersion: h.Version, ServerVersion: s.o.Version}
		s.logf("%s: %v", peer, ve)
		_ = writeMsg(c, &Msg{Type: msgError, Error: ve.Error()})
		return
	}
	src := peerIP(c.RemoteAddr())
	id, refusal := s.admit(src)
	if refusal != "" {
		s.logf("%s: refused: %s", peer, refusal)
		_ = writeMsg(c, &Msg{Type: msgError, Code: codeBusy, Error: refusal})
		return
	}
	leave()
	released := false
	release := func() {
		if !released {
			released = true
			s.release(src)
		}
	}
	defer release()
	welcome := &Msg{Type: msgWelcome, Proto: ProtoVersion, Version: s.o.Version, Session: id, Env: &s.env}
	if s.o.Token != "" {
		welcome.Nonce = newNonce()
		if len(h.Nonce) == nonceLen {
			welcome.Proof = authProof(s.o.Token, "server", h.Nonce, welcome.Nonce)
		}
	}
	if err := writeMsg(c, welcome); err != nil {
		return
	}
	m, err := readMsg(c, msgSetup)
	if err != nil || m.Setup == nil {
		s.logf("%s: bad setup: %v", peer, err)
		return
	}
	if s.o.Token != "" && !validProof(s.o.Token, "client", welcome.Nonce, h.Nonce, m.Proof) {
		s.logf("%s: refused: wrong or missing token", peer)
		_ = writeMsg(c, &Msg{Type: msgError, Code: codeAuth,
			Error: "authentication failed: this server requires a token; give the client the server's --token (or CNIBENCH_TOKEN)"})
		return
	}
	if err := s.checkSetup(m.Setup); err != nil {
		_ = writeMsg(c, &Msg{Type: msgError, Error: err.Error()})
		return
	}
	ss := newSession(s, id, *m.Setup)
	ss.ctl = c
	s.mu.Lock()
	s.sessions[id] = ss
	s.mu.Unlock()
	defer func() {
		ss.abort()
		ss.wait()
		s.mu.Lock()
		delete(s.sessions, id)
		s.mu.Unlock()
	}()
	st := m.Setup
	s.logf("%s: session %d: %s msg %d B parallel %d for %v", peer, id, st.Test, st.MsgSize, st.Parallel, time.Duration(st.DurationNs))
	// The whole session, not only each read, is bounded in time.
	_ = c.SetDeadline(time.Now().Add(time.Duration(st.DurationNs+st.WarmupNs) + 30*time.Second))
	if err := writeMsg(c, &Msg{Type: msgReady}); err != nil {
		return
	}
	if _, err := readMsg(c, msgStart); err != nil {
		s.logf("%s: session %d ended before start: %v", peer, id, err)
		return
	}
	a := ss.snapshot()
	if err := writeMsg(c, &Msg{Type: msgStarted}); err != nil {
		s.logf("%s: session %d: send started: %v", peer, id, err)
		return
	}
	stop, err := readMsg(c, msgStop)
	if err != nil {
		s.logf("%s: session %d ended before stop: %v", peer, id, err)
		return
	}
	rep := ss.finish(a, stop.UDPSent)
	// The slot is free once the report is ready: a client that starts its
	// next session as soon as it reads this one's report must not find the
	// server "busy" with a session that is only tearing down.
	release()
	if err := writeMsg(c, &Msg{Type: msgReport, Report: rep}); err != nil {
		s.logf("%s: session %d: send report: %v", peer, id, err)
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

func (s *Server) checkSetup(st *Setup) error {
	if !result.ValidTest(st.Test) {
		return fmt.Errorf("unknown test %q (known: %v)", st.Test, result.Tests)
	}
	if err := limits.CheckSize(st.Test, st.MsgSize); err != nil {
		return err
	}
	if st.Parallel < 1 || st.Parallel > MaxParallel {
		return fmt.Errorf("parallel %d out of range 1-%d", st.Parallel, MaxParallel)
	}
	if st.DurationNs <= 0 || st.WarmupNs < 0 {
		return errors.New("duration must be > 0 and warmup ≥ 0")
	}
	// Each term is bounded before they are added, so a hostile setup
	// cannot overflow the sum into a negative (and so accepted) duration.
	limit := int64(s.o.MaxSession)
	if st.DurationNs > limit || st.WarmupNs > limit || st.DurationNs+st.WarmupNs > limit {
		return fmt.Errorf("duration+warmup %v exceeds this server's session limit %v",
			time.Duration(st.DurationNs)+time.Duration(st.WarmupNs), s.o.MaxSession)
	}
	if math.IsNaN(st.RateBps) || math.IsInf(st.RateBps, 0) || st.RateBps < 0 {
		return fmt.Errorf("rate %v: must be a finite number ≥ 0", st.RateBps)
	}
	return nil
}

// MaxParallel bounds --parallel (limits.MaxParallel).
const MaxParallel = limits.MaxParallel

// session is one client's test on the server.
type session struct {
	srv   *Server
	id    uint32
	setup Setup
	resp  []byte   // tcp_crr response
	ctl   net.Conn // closed by abort, so a server shutdown ends the session at once

	mu      sync.Mutex
	fds     map[int]int // stream -> fd
	stopped bool
	wg      sync.WaitGroup
	stop    atomic.Bool

	where     *placement     // a sampler per stream loop (tcp_crr: one, shared)
	bytes     []atomic.Int64 // per stream, bytes received (sinks)
	lastRecv  atomic.Int64   // nanotime of the last measured udp_bw datagram
	firstRecv atomic.Int64   // nanotime of the first one
	trackers  []*seqTracker  // per stream, owned by its loop until wg.Wait
}

func newSession(s *Server, id uint32, st Setup) *session {
	ss := &session{srv: s, id: id, setup: st, fds: map[int]int{},
		bytes: make([]atomic.Int64, st.Parallel), trackers: make([]*seqTracker, st.Parallel)}
	// tcp_crr's server answers on the accept loop and on a goroutine per
	// connection, not on a loop per stream: one sampler, fed by all of them.
	n := st.Parallel
	if st.Test == result.TCPCRR {
		n = 1
	}
	ss.where = newPlacement(s.o.FS, st.Test, n)
	if st.Test == result.TCPCRR {
		ss.resp = make([]byte, st.MsgSize)
	}
	return ss
}

// claim reserves stream i for fd; false if out of range, taken or stopped.
func (ss *session) claim(i, fd int) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.stopped || i < 0 || i >= ss.setup.Parallel {
		return false
	}
	if _, taken := ss.fds[i]; taken {
		return false
	}
	ss.fds[i] = fd
	ss.wg.Add(1)
	return true
}

func (ss *session) attachTCP(i, fd int) bool {
	if ss.setup.Test != result.TCPLat && ss.setup.Test != result.TCPBW {
		return false
	}
	if !ss.claim(i, fd) {
		return false
	}
	// Short timeouts let the loop notice the session's end.
	_ = setTimeouts(fd, 100*time.Millisecond, time.Second)
	switch ss.setup.Test {
	case result.TCPLat:
		_ = setNoDelay(fd)
	case result.TCPBW:
		if ss.setup.MsgSize >= tcpLowat {
			setRcvLowat(fd)
		}
	}
	return true
}

func (ss *session) attachUDP(i int, from unix.Sockaddr) {
	if ss.setup.Test != result.UDPLat && ss.setup.Test != result.UDPBW {
		return
	}
	var ack [udpHelloLen]byte
	putUDPHello(ack[:], udpAckMagic, ss.id, uint32(i))
	ss.mu.Lock()
	fd, ok := ss.fds[i]
	ss.mu.Unlock()
	if ok { // a retried hello: answer again from the stream's socket
		_, _ = unix.Write(fd, ack[:])
		return
	}
	fd, err := udpSocket(ss.srv.ip, ss.srv.port)
	if err != nil {
		ss.srv.logf("session %d: udp socket: %v", ss.id, err)
		return
	}
	if err := unix.Connect(fd, from); err != nil {
		unix.Close(fd)
		return
	}
	_ = setTimeouts(fd, 100*time.Millisecond, time.Second)
	if ss.setup.Test == result.UDPBW {
		// Ask for a large buffer; the kernel caps it at net.core.rmem_max,
		// which is the knob the UDP-loss experiments turn.
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	}
	if !ss.claim(i, fd) {
		unix.Close(fd)
		return
	}
	_, _ = unix.Write(fd, ack[:])
	go ss.serve(func() { ss.runUDP(i, fd) })
}

// serve runs one of the session's data loops (counted in ss.wg) the way
// each must run: on an OS thread of its own, with one more P reserved
// because the loop keeps its P while blocked in a raw syscall.
func (ss *session) serve(loop func()) {
	defer ss.wg.Done()
	defer reserveProcs(1)()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	loop()
}

func (ss *session) runTCP(i, fd int) {
	w := ss.where.samplers[i]
	if ss.setup.Test == result.TCPLat {
		echoTCP(fd, ss.setup.MsgSize, w, &ss.stop)
	} else {
		sinkTCP(fd, &ss.bytes[i], w, &ss.stop)
	}
}

func (ss *session) runUDP(i, fd int) {
	w := ss.where.samplers[i]
	if ss.setup.Test == result.UDPLat {
		echoUDP(fd, w, &ss.stop)
		return
	}
	t := newSeqTracker(ss.setup.MsgSize >= udpHdrTS, ss.setup.MsgSize < udpHdrMin)
	ss.trackers[i] = t
	sinkUDP(fd, ss.setup.MsgSize, t, &ss.bytes[i], &ss.firstRecv, &ss.lastRecv, w, &ss.stop)
}

// abort ends the session's loops and closes its sockets. Idempotent.
func (ss *session) abort() {
	ss.stop.Store(true)
	ss.mu.Lock()
	if !ss.stopped {
		ss.stopped = true
		for _, fd := range ss.fds {
			_ = unix.Shutdown(fd, unix.SHUT_RDWR)
		}
	}
	ss.mu.Unlock()
	if ss.srv.closed.Load() && ss.ctl != nil {
		_ = ss.ctl.Close()
	}
}

func (ss *session) wait() {
	ss.wg.Wait()
	ss.mu.Lock()
	for i, fd := range ss.fds {
		unix.Close(fd)
		delete(ss.fds, i)
	}
	ss.mu.Unlock()
}

type serverSnap struct {
	cpu     cpuSnap
	bytes   []int64
	retrans []int64
	retErr  error
	udp     sysinfo.UDPCounters
	udpErr  error
}

func (ss *session) snapshot() serverSnap {
	s := serverSnap{bytes: make([]int64, len(ss.bytes))}
	for i := range ss.bytes {
		s.bytes[i] = ss.bytes[i].Load()
	}
	if ss.setup.Test == result.TCPLat || ss.setup.Test == result.TCPBW {
		s.retrans = make([]int64, ss.setup.Parallel)
		ss.mu.Lock()
		for i, fd := range ss.fds {
			r, err := tcpRetransmits(fd)
			if err != nil {
				s.retErr = err
			}
			s.retrans[i] = r
		}
		ss.mu.Unlock()
	}
	if ss.setup.Test == result.UDPLat || ss.setup.Test == result.UDPBW {
		s.udp, s.udpErr = ss.srv.o.FS.ReadUDP()
	}
	s.cpu = takeCPU(ss.srv.o.FS, ss.where)
	return s
}

// queued reports whether a stream's socket holds a datagram not yet read
// (SIOCINQ: for UDP, the size of the next pending datagram, 0 if none).
func (ss *session) queued() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, fd := range ss.fds {
		if n, err := unix.IoctlGetInt(fd, unix.SIOCINQ); err == nil && n > 0 {
			return true
		}
	}
	return false
}

// finish waits for in-flight datagrams, takes the stop snapshot, ends the
// loops and builds the report.
func (ss *session) finish(a serverSnap, udpSent []int64) *Report {
	if ss.setup.Test == result.UDPBW {
		// Datagrams sent just before stop may still be in flight or queued:
		// wait until 100 ms pass without one and every stream's socket is
		// read empty (at most 2 s). The quiet time alone is not enough: a
		// receiver that was descheduled (or stopped) for 100 ms has a full
		// queue it has not read yet, and those datagrams were delivered,
		// not lost.
		deadline := nanotime() + 2e9
		for nanotime() < deadline && (nanotime()-ss.lastRecv.Load() < 100e6 || ss.queued()) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	b := ss.snapshot()
	ss.abort()
	ss.wait()
	rep := &Report{Seconds: float64(b.cpu.wall-a.cpu.wall) / 1e9, Missing: map[string]string{}}
	var txns, moved int64
	switch ss.setup.Test {
	case result.TCPBW:
		rep.BytesReceived = make([]int64, len(b.bytes))
		for i := range b.bytes {
			rep.BytesReceived[i] = b.bytes[i] - a.bytes[i]
			moved += rep.BytesReceived[i]
		}
	case result.UDPBW:
		// Only measured datagrams are counted, whenever the start mark was
		// read; the receiver's interval runs from the first to the last of
		// them (the stop snapshot came after a drain wait).
		rep.BytesReceived = b.bytes
		for _, n := range b.bytes {
			moved += n
		}
		if f, l := ss.firstRecv.Load(), ss.lastRecv.Load(); f > 0 && l > f {
			rep.Seconds = float64(l-f) / 1e9
		} else {
			rep.Seconds = 0
			rep.Missing["throughput.receiver_bps"] = "fewer than two measured datagrams arrived"
			rep.Missing["throughput.receiver_pps"] = "fewer than two measured datagrams arrived"
		}
	}
	if ss.setup.Test == result.UDPBW {
		for _, t := range ss.trackers {
			if t == nil {
				rep.UDP = append(rep.UDP, UDPCount{})
				continue
			}
			rep.UDP = append(rep.UDP, t.count())
		}
	}
	if a.retrans != nil {
		if a.retErr != nil || b.retErr != nil {
			rep.Missing["tcp.retransmits"] = "server TCP_INFO failed"
		} else {
			rep.Retransmits = make([]int64, len(a.retrans))
			for i := range a.retrans {
				rep.Retransmits[i] = b.retrans[i] - a.retrans[i]
			}
		}
	}
	if ss.setup.Test == result.UDPLat || ss.setup.Test == result.UDPBW {
		if a.udpErr != nil || b.udpErr != nil {
			rep.Missing["udp.kernel_rcvbuf_errors"] = "server could not read /proc/net/snmp"
			rep.Missing["udp.kernel_in_errors"] = "server could not read /proc/net/snmp"
		} else {
			d := b.udp.Sub(a.udp)
			if v, ok := d["RcvbufErrors"]; ok {
				rep.KernelRcvbufErrors = result.I(v)
			}
			if v, ok := d["InErrors"]; ok {
				rep.KernelInErrors = result.I(v)
			}
		}
	}
	missing := map[string]string{}
	// The server cannot count transactions (the client does); it reports
	// us_per_transaction with the client's count filled in by the client.
	rep.CPU = cpuSide(a.cpu, b.cpu, txns, moved, missing)
	delete(missing, "us_per_transaction")
	for k, v := range missing {
		rep.Missing["cpu.server."+k] = v
	}
	_ = udpSent
	return rep
}

// Server-side loops. Each runs on a locked OS thread with blocking calls;
// the 100 ms receive timeout only serves to notice the session's end.

// readAgain reports whether a server loop should read again after a read
// that returned err: it timed out or a signal interrupted it, and the
// session still runs. On UDP, ECONNREFUSED is transient too: it is the ICMP
// error an earlier reply left on the socket, not this read's failure. A nil
// err is never read again (stop is then not even loaded: the per-packet
// path pays one comparison).
func readAgain(err error, udp bool, stop *atomic.Bool) bool {
	if err == nil {
		return false
	}
	transient := isTimeout(err) || err == unix.EINTR || (udp && err == unix.ECONNREFUSED)
	return transient && !stop.Load()
}

func echoTCP(fd, size int, w *cpuSampler, stop *atomic.Bool) {
	buf := make([]byte, size)
	off := 0
	for {
		n, err := sysRead(fd, buf[off:])
		if readAgain(err, false, stop) {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		off += n
		if off < size {
			continue
		}
		off = 0
		for sent := 0; sent < size; {
			n, err := sysWrite(fd, buf[sent:])
			if err != nil && err != unix.EINTR && !(isTimeout(err) && !stop.Load()) {
				return
			}
			sent += max(n, 0)
		}
		w.tick(1)
	}
}

// tcpReadSize bounds one read of a tcp_bw receiver (iperf3 reads its write
// size, -l). A reader that asks for everything queued drains the queue at
// every read, then sleeps until the sender's softirq wakes it again: with
// 1 MiB reads the receiver made 2,800–3,600 context switches per GB, with
// 128 KiB reads 460–2,300 (one interleaved A/B at 128 KiB writes). With the
// 64 KiB low-water mark (tcpLowat), client and server pinned, 128 KiB reads
// streamed faster than 256 KiB, 512 KiB or 1 MiB reads at 128 KiB writes
// (23.2–24.6 Gb/s vs 20.8–20.9 for 256 KiB in the two quiet rounds of
// 23:10–23:12 on 2026-11-26) and no slower at 64 KiB and 1 MiB writes.
const tcpReadSize = 128 << 10

// tcpLowat is the SO_RCVLOWAT of a tcp_bw receiving socket: its reader
// sleeps until this much is queued instead of being woken for each segment
// the sender's softirq delivers (every write, at 16 KiB writes), and every
// wake-up the sender's CPU does not make is CPU it streams with. It bounds
// how far the receiver's count can trail the bytes delivered at a mark.
// Only streams of writes at least this large get it: below, any mark
// (the write size, half of it, 64 KiB) streamed slower than none — at 16
// KiB writes, pinned client and server, three interleaved rounds (22:47–
// 22:52 on 2026-11-26): none 5.3–6.0 Gb/s, 64 KiB 3.7–4.9, one write 4.1–
// 4.5, iperf3 4.8–5.1 — while at 64 KiB writes the 64 KiB mark streamed
// 21–24 Gb/s and none 11.6–18.6.
const tcpLowat = 64 << 10

// setRcvLowat sets fd's SO_RCVLOWAT to tcpLowat, or to half the socket's
// receive buffer if that is less: the kernel grows a buffer that cannot hold
// twice the mark and clamps the window to the mark (tcp_set_rcvlowat), which
// would override a lab's socket-buffer knob. A failure leaves the default (1),
// which only costs wake-ups.
func setRcvLowat(fd int) {
	rcvbuf, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	if err != nil {
		return
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, min(tcpLowat, rcvbuf/2))
}

// sinkTCP reads and counts every byte of a tcp_bw stream, through
// RawSyscall for the reason tcpBWLoop writes through it.
func sinkTCP(fd int, bytes *atomic.Int64, w *cpuSampler, stop *atomic.Bool) {
	buf := make([]byte, tcpReadSize)
	for {
		n, err := sysRead(fd, buf)
		if readAgain(err, false, stop) {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		bytes.Add(int64(n))
		w.tick(int64(n))
	}
}

func echoUDP(fd int, w *cpuSampler, stop *atomic.Bool) {
	buf := make([]byte, 65536)
	for {
		n, err := sysRead(fd, buf)
		if readAgain(err, true, stop) {
			continue
		}
		if err != nil || stop.Load() { // after shutdown a read returns 0 bytes forever
			return
		}
		if n > 0 {
			_, _ = sysWrite(fd, buf[:n])
		}
		w.tick(1)
	}
}

func sinkUDP(fd, size int, t *seqTracker, bytes, first, last *atomic.Int64, w *cpuSampler, stop *atomic.Bool) {
	b := newBatch(64, max(size, udpHelloLen))
	for {
		n, err := recvmmsg(fd, b)
		if readAgain(err, true, stop) {
			continue
		}
		if err != nil || stop.Load() { // after shutdown, reads return empty datagrams forever
			return
		}
		now := nanotime()
		w.tick(int64(n))
		var got int64
		for i := range n {
			l := int(b.hdrs[i].n)
			switch kind, seq, ts := readUDPHdr(b.bufs[i][:l], t.countOnly); kind {
			case udpShortMeasured:
				t.received++
				got += int64(l)
			case udpMeasured:
				t.add(seq, ts, now)
				got += int64(l)
			}
		}
		if got > 0 {
			bytes.Add(got)
			last.Store(now)
			first.CompareAndSwap(0, now)
		}
	}
}
