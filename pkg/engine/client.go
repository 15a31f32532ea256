package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/sysinfo"
	"golang.org/x/sys/unix"
)

// ClientOptions is one test against one server.
type ClientOptions struct {
	Server   string // host or IP
	Port     int    // 0 means DefaultPort
	Test     string
	MsgSize  int
	Parallel int // 0 means 1
	Duration time.Duration
	Warmup   time.Duration
	RateBps  float64 // udp_bw only; 0 = unlimited
	Version  string  // cnibench version, for the hello and the result
	// ConnectTimeout bounds connecting and the handshake; 0 means 3s.
	ConnectTimeout time.Duration
	// UDPTimeout is how long udp_lat waits for a reply before counting the
	// datagram lost; 0 means 100ms.
	UDPTimeout time.Duration
	// FS is where /proc and /sys are read; zero means the host.
	FS sysinfo.FS
	// Token, if set, is the secret shared with the server (auth.go): the
	// client proves it and requires the server to prove it too.
	Token string
	// proto overrides ProtoVersion in the hello (tests of the mismatch).
	proto int
}

// Phases of a run, read by every hot loop once per transaction or batch.
const (
	phWarmup int32 = iota
	phMeasure
	phStop
	// phPause: between the start mark and the server's answer, udp_bw
	// sends nothing, so no warmup datagram reaches the server's socket
	// inside its counter window (the other tests keep running unmeasured).
	phPause
)

// Validate checks the options without touching the network.
func (o *ClientOptions) Validate() error {
	if o.Server == "" {
		return errors.New("no server: give --server HOST")
	}
	if !result.ValidTest(o.Test) {
		return fmt.Errorf("unknown test %q (known: %v)", o.Test, result.Tests)
	}
	// The message size is not checked again here: callers parse it at their
	// edge with limits.CheckSize (the client's flags, an experiment's Check),
	// and the server refuses a size outside the same limits at setup.
	if o.Duration <= 0 {
		return fmt.Errorf("duration %v: must be > 0", o.Duration)
	}
	if o.Warmup < 0 {
		return fmt.Errorf("warmup %v: must be ≥ 0", o.Warmup)
	}
	if o.Parallel < 0 || o.Parallel > MaxParallel {
		return fmt.Errorf("parallel %d: must be 1-%d", o.Parallel, MaxParallel)
	}
	if o.RateBps < 0 {
		return fmt.Errorf("rate %v: must be ≥ 0 (0 = unlimited)", o.RateBps)
	}
	return nil
}

func (o *ClientOptions) defaults() {
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.Parallel == 0 {
		o.Parallel = 1
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 3 * time.Second
	}
	if o.UDPTimeout == 0 {
		o.UDPTimeout = 100 * time.Millisecond
	}
	if o.FS == (sysinfo.FS{}) {
		o.FS = sysinfo.Host
	}
	if o.proto == 0 {
		o.proto = ProtoVersion
	}
}

// stream is one connection or socket of a run and what its loop measured.
type stream struct {
	fd      int
	hist    *latHist
	txns    int64
	bytes   int64
	sent    int64 // udp datagrams (measured)
	lost    int64 // udp_lat: no reply within the timeout
	late    int64 // udp_lat: replies that came after their timeout
	where   *cpuSampler
	err     error
	retrans [2]int64
}

var (
	gcMu     sync.Mutex
	gcPaused int
	gcSaved  int
)

// pauseGC turns the collector off until the last concurrent Run ends.
func pauseGC() func() {
	gcMu.Lock()
	if gcPaused == 0 {
		gcSaved = debug.SetGCPercent(-1)
	}
	gcPaused++
	gcMu.Unlock()
	return func() {
		gcMu.Lock()
		if gcPaused--; gcPaused == 0 {
			debug.SetGCPercent(gcSaved)
		}
		gcMu.Unlock()
	}
}

// Run measures one test and returns its result. Errors name what failed and
// what to do; a failed run leaves no socket behind.
func Run(ctx context.Context, o ClientOptions) (*result.Result, error) {
	o.defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ip, err := resolve(o.Server)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(o.Port))
	cfd, err := dialTCP(ip, o.Port, o.ConnectTimeout)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w (is `cnibench server` running there and the port open?)", addr, err)
	}
	var pre [preambleLen]byte
	putPreamble(pre[:], kindControl, 0, 0)
	if err := writeFull(cfd, pre[:]); err != nil {
		unix.Close(cfd)
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	c, err := fdConn(cfd)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stopWatch := context.AfterFunc(ctx, func() { c.Close() })
	defer stopWatch()

	_ = c.SetDeadline(time.Now().Add(o.ConnectTimeout + 5*time.Second))
	hello := &Msg{Type: msgHello, Proto: o.proto, Version: o.Version}
	if o.Token != "" {
		hello.Nonce = newNonce()
	}
	if err := writeMsg(c, hello); err != nil {
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	w, err := readMsg(c, msgWelcome)
	if err != nil {
		return nil, handshakeErr(addr, err)
	}
	if w.Proto != o.proto {
		return nil, &VersionError{Client: o.proto, Server: w.Proto, ClientVersion: o.Version, ServerVersion: w.Version}
	}
	st := Setup{Test: o.Test, MsgSize: o.MsgSize, Parallel: o.Parallel, DurationNs: int64(o.Duration), WarmupNs: int64(o.Warmup), RateBps: o.RateBps}
	setup := &Msg{Type: msgSetup, Setup: &st}
	switch {
	case o.Token == "" && len(w.Nonce) > 0:
		return nil, fmt.Errorf("server %s requires a token: give --token or set CNIBENCH_TOKEN to the server's: %w", addr, ErrAuth)
	case o.Token != "" && (len(w.Nonce) != nonceLen || !validProof(o.Token, "server", hello.Nonce, w.Nonce, w.Proof)):
		return nil, fmt.Errorf("server %s did not prove the token (it runs without --token, or with another one): %w", addr, ErrAuth)
	case o.Token != "":
		setup.Proof = authProof(o.Token, "client", w.Nonce, hello.Nonce)
	}
	if err := writeMsg(c, setup); err != nil {
		return nil, fmt.Errorf("setup with %s: %w", addr, err)
	}
	if _, err := readMsg(c, msgReady); err != nil {
		return nil, fmt.Errorf("server %s refused the test: %w", addr, err)
	}

	r := result.New(result.Tool{Name: "cnibench", Version: o.Version}, o.Test, o.MsgSize)
	r.Parallel, r.Server = o.Parallel, addr
	clientEnv := o.FS.Fingerprint(o.Version)
	r.Env = result.Env{Client: &clientEnv, Server: w.Env}

	streams := make([]*stream, o.Parallel)
	where := newPlacement(o.FS, o.Test, o.Parallel)
	defer func() {
		for _, s := range streams {
			if s != nil && s.fd >= 0 {
				unix.Close(s.fd)
			}
		}
	}()
	for i := range streams {
		s := &stream{fd: -1, hist: newLatHist(), where: where.samplers[i]}
		streams[i] = s
		switch o.Test {
		case result.TCPLat, result.TCPBW:
			s.fd, err = openTCPStream(ip, o, w.Session, i)
		case result.UDPLat, result.UDPBW:
			s.fd, err = openUDPStream(ip, o, w.Session, i)
		}
		if err != nil {
			return nil, fmt.Errorf("open stream %d to %s: %w", i, addr, err)
		}
	}

	// The loops allocate nothing; a collection during the measured interval
	// would only add noise.
	defer pauseGC()()
	defer reserveProcs(len(streams))()
	var phase atomic.Int32
	var wg sync.WaitGroup
	started := make(chan struct{}, len(streams))
	for i, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			started <- struct{}{}
			runLoop(&o, ip, w.Session, i, s, &phase)
		}()
	}
	for range streams {
		<-started
	}
	abort := func(err error) (*result.Result, error) {
		phase.Store(phStop)
		wg.Wait()
		return nil, err
	}
	if !sleepCtx(ctx, o.Warmup) {
		return abort(ctx.Err())
	}
	_ = c.SetDeadline(time.Now().Add(o.Duration + 30*time.Second))
	a := takeCPU(o.FS, where)
	retransAt(streams, 0, o.Test)
	phase.Store(phPause)
	if err := writeMsg(c, &Msg{Type: msgStart}); err != nil {
		return abort(fmt.Errorf("server %s went away: %w", addr, err))
	}
	// Measured data only once the server has opened its window: a server
	// descheduled (or stopped) when the start mark arrived would otherwise
	// miss the kernel's drops of the first measured datagrams.
	if _, err := readMsg(c, msgStarted); err != nil {
		return abort(fmt.Errorf("server %s did not start: %w", addr, err))
	}
	phase.Store(phMeasure)
	r.Start = time.Now()
	if !sleepCtx(ctx, o.Duration) {
		return abort(ctx.Err())
	}
	phase.Store(phStop)
	b := takeCPU(o.FS, where)
	retransAt(streams, 1, o.Test)
	wg.Wait()
	for i, s := range streams {
		if s.err != nil {
			return nil, fmt.Errorf("stream %d: %w", i, s.err)
		}
	}
	sent := make([]int64, len(streams))
	for i, s := range streams {
		sent[i] = s.sent
	}
	if err := writeMsg(c, &Msg{Type: msgStop, UDPSent: sent}); err != nil {
		return nil, fmt.Errorf("server %s went away: %w", addr, err)
	}
	rm, err := readMsg(c, msgReport)
	if err != nil {
		return nil, fmt.Errorf("no report from server %s: %w", addr, err)
	}
	if rm.Report == nil {
		return nil, fmt.Errorf("server %s sent an empty report", addr)
	}
	wall := float64(b.wall-a.wall) / 1e9
	r.DurationSeconds, r.WarmupSeconds = wall, o.Warmup.Seconds()
	assemble(r, &o, streams, rm.Report, a, b, wall)
	return r, nil
}

func handshakeErr(addr string, err error) error {
	var pe *PeerError
	if errors.As(err, &pe) {
		return fmt.Errorf("server %s: %w", addr, pe)
	}
	return fmt.Errorf("handshake with %s: %w (is it a cnibench server?)", addr, err)
}

func resolve(host string) (net.IP, error) {
	if ip := net.ParseIP(host); ip != nil {
		return ip, nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("resolve server %q: %v", host, err)
	}
	for _, ip := range ips {
		if ip.To4() != nil {
			return ip, nil
		}
	}
	return ips[0], nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func retransAt(streams []*stream, i int, test string) {
	if test != result.TCPLat && test != result.TCPBW {
		return
	}
	for _, s := range streams {
		s.retrans[i], _ = tcpRetransmits(s.fd)
	}
}

func openTCPStream(ip net.IP, o ClientOptions, session uint32, i int) (int, error) {
	fd, err := dialTCP(ip, o.Port, o.ConnectTimeout)
	if err != nil {
		return -1, err
	}
	if o.Test == result.TCPLat {
		_ = setNoDelay(fd)
	}
	var pre [preambleLen]byte
	putPreamble(pre[:], kindData, session, uint32(i))
	if err := writeFull(fd, pre[:]); err != nil {
		unix.Close(fd)
		return -1, err
	}
	// Loops poll the phase whenever a blocking call times out.
	_ = setTimeouts(fd, 200*time.Millisecond, 200*time.Millisecond)
	return fd, nil
}

func openUDPStream(ip net.IP, o ClientOptions, session uint32, i int) (int, error) {
	sa, af := sockaddr(ip, o.Port)
	fd, err := unix.Socket(af, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	_ = setTimeouts(fd, 100*time.Millisecond, time.Second)
	var hello, buf [udpHelloLen + 1]byte
	putUDPHello(hello[:], udpHelloMagic, session, uint32(i))
	deadline := time.Now().Add(o.ConnectTimeout)
	for time.Now().Before(deadline) {
		if _, err := unix.Write(fd, hello[:udpHelloLen]); err != nil && err != unix.ECONNREFUSED {
			unix.Close(fd)
			return -1, err
		}
		n, err := unix.Read(fd, buf[:])
		if err == nil {
			if sid, st, ok := parseUDPHello(buf[:n], udpAckMagic); ok && sid == session && st == uint32(i) {
				if o.Test == result.UDPBW {
					_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
				} else {
					_ = setTimeouts(fd, o.UDPTimeout, time.Second)
				}
				return fd, nil
			}
		}
	}
	unix.Close(fd)
	return -1, fmt.Errorf("no UDP answer within %v (is UDP port %d open to this client?)", o.ConnectTimeout, o.Port)
}

func fdConn(fd int) (net.Conn, error) {
	return newFileConn(fd)
}
