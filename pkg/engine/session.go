// One client's session on the server: the data connections and UDP peers
// it claims, the goroutines that serve them, the snapshots around the
// measured interval and the report assembled from them.

package engine

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/sysinfo"
	"golang.org/x/sys/unix"
)

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
