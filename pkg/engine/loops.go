package engine

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"golang.org/x/sys/unix"
)

// Client hot loops. Each runs on a goroutine locked to its OS thread and
// makes blocking syscalls on a raw fd: no netpoller, no allocation per
// transaction, one atomic load of the phase per transaction or batch, and
// two vDSO clock reads per latency sample. The histogram is only recorded.

func runLoop(o *ClientOptions, ip net.IP, session uint32, i int, s *stream, phase *atomic.Int32) {
	switch o.Test {
	case result.TCPLat:
		s.err = tcpLatLoop(s, o.MsgSize, phase)
	case result.UDPLat:
		s.err = udpLatLoop(s, o.MsgSize, int64(o.UDPTimeout), phase)
	case result.TCPCRR:
		s.err = crrLoop(s, o, ip, session, i, phase)
	case result.TCPBW:
		s.err = tcpBWLoop(s, o.MsgSize, phase)
	case result.UDPBW:
		s.err = udpBWLoop(s, o.MsgSize, o.RateBps/float64(o.Parallel), phase)
	}
}

// readAll reads len(b) bytes, retrying on the receive timeout unless the
// run is stopping. It returns false (and no error) when stopped midway.
func readAll(fd int, b []byte, phase *atomic.Int32) (bool, error) {
	return ioAll(unix.SYS_READ, fd, b, phase)
}

// writeAll writes all of b, as readAll reads.
func writeAll(fd int, b []byte, phase *atomic.Int32) (bool, error) {
	return ioAll(unix.SYS_WRITE, fd, b, phase)
}

// ioAll is readAll (trap SYS_READ) and writeAll (SYS_WRITE): the syscall is
// a number, not a function value, so the per-transaction path has no
// indirect call.
func ioAll(trap uintptr, fd int, b []byte, phase *atomic.Int32) (bool, error) {
	for off := 0; off < len(b); {
		n, err := sysIO(trap, fd, b[off:], rawSyscalls)
		if err != nil {
			if err == unix.EINTR || isTimeout(err) {
				// The runtime's preemption signal interrupts raw syscalls
				// every few ms, restarting SO_RCVTIMEO: check the phase on
				// EINTR too, or a dead peer would keep us here forever.
				if phase.Load() != phStop {
					continue
				}
				return false, nil
			}
			return false, err
		}
		if n == 0 && trap == unix.SYS_READ {
			return false, errPeerClosed
		}
		off += n
	}
	return true, nil
}

// answered counts a transaction answered ns after it was sent, and its
// latency, when it was sent in the measured phase ph. The caller reads the
// clock, so the stamp is taken before this call.
func (s *stream) answered(ph int32, ns int64) {
	if ph == phMeasure {
		s.hist.record(ns)
		s.txns++
	}
}

func tcpLatLoop(s *stream, size int, phase *atomic.Int32) error {
	buf := make([]byte, size)
	fd, w := s.fd, s.where
	for {
		ph := phase.Load()
		if ph == phStop {
			return nil
		}
		t0 := nanotime()
		if ok, err := writeAll(fd, buf, phase); !ok {
			return err
		}
		if ok, err := readAll(fd, buf, phase); !ok {
			return err
		}
		s.answered(ph, nanotime()-t0)
		w.tick(1)
	}
}

// putSeq writes seq into b's first min(len(b), 8) bytes, little-endian, so
// even a 1-byte datagram carries the low bits of its sequence number: a late
// reply is told from the current one unless it is 256 transactions late.
func putSeq(b []byte, seq uint64) {
	for i := 0; i < len(b) && i < 8; i++ {
		b[i] = byte(seq >> (8 * i))
	}
}

func seqMatches(b []byte, seq uint64) bool {
	for i := 0; i < len(b) && i < 8; i++ {
		if b[i] != byte(seq>>(8*i)) {
			return false
		}
	}
	return true
}

func udpLatLoop(s *stream, size int, timeout int64, phase *atomic.Int32) error {
	out := make([]byte, size)
	in := make([]byte, size+1) // +1 tells an oversized datagram from ours
	fd, w := s.fd, s.where
	var seq uint64
	for {
		ph := phase.Load()
		if ph == phStop {
			return nil
		}
		w.tick(1)
		seq++
		putSeq(out, seq)
		t0 := nanotime()
		if _, err := sysWrite(fd, out); err != nil {
			if err == unix.ECONNREFUSED || err == unix.EINTR || isTimeout(err) {
				continue // an ICMP error from an earlier datagram; not ours to count
			}
			return err
		}
		if ph == phMeasure {
			s.sent++
		}
		for {
			n, err := sysRead(fd, in)
			if err != nil {
				// EINTR (the runtime's preemption signal) restarts the
				// socket's receive timeout, so the loss timeout is also
				// checked against our own clock.
				if (err == unix.EINTR || err == unix.ECONNREFUSED) && nanotime()-t0 < timeout {
					continue
				}
				if isTimeout(err) || err == unix.EINTR || err == unix.ECONNREFUSED { // no reply in time: lost, never latency
					if ph == phMeasure {
						s.lost++
					}
					break
				}
				return err
			}
			if n != size || !seqMatches(in[:n], seq) {
				if ph == phMeasure {
					s.late++
				}
				if nanotime()-t0 >= timeout { // stale replies must not extend the wait
					if ph == phMeasure {
						s.lost++
					}
					break
				}
				continue
			}
			s.answered(ph, nanotime()-t0)
			break
		}
	}
}

func crrLoop(s *stream, o *ClientOptions, ip net.IP, session uint32, i int, phase *atomic.Int32) error {
	req := make([]byte, preambleLen+o.MsgSize)
	putPreamble(req, kindCRR, session, uint32(i))
	resp := make([]byte, o.MsgSize)
	sa, af := sockaddr(ip, o.Port)
	tv := unix.NsecToTimeval(int64(time.Second))
	w := s.where
	for {
		ph := phase.Load()
		if ph == phStop {
			return nil
		}
		t0 := nanotime()
		fd, err := unix.Socket(af, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		// SO_SNDTIMEO bounds connect; SO_RCVTIMEO the response.
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		err = unix.Connect(fd, sa)
		for err == unix.EINTR {
			err = unix.Connect(fd, sa)
		}
		if err == nil {
			err = writeFull(fd, req)
		}
		if err == nil {
			err = readFull(fd, resp)
		}
		if err == nil {
			// The server closes first; wait for its FIN before closing, so
			// TIME_WAIT lands on the server's side. A client that closed at
			// once would race it, both sides would hold TIME_WAIT, and the
			// client's ~28k ephemeral ports would run out within a minute
			// of back-to-back runs (measured: 5000/s collapsing to 300/s).
			err = awaitEOF(fd, resp[:1])
		}
		unix.Close(fd)
		if err != nil {
			if phase.Load() == phStop && (isTimeout(err) || err == unix.EINPROGRESS) {
				return nil
			}
			return err
		}
		s.answered(ph, nanotime()-t0)
		w.tick(1)
	}
}

// tcpBWLoop writes size bytes per call, what iperf3 -l asks of each of its
// writes. Through RawSyscall, as the latency loops: with the runtime's
// Syscall, a write that blocked on a full send buffer could lose its P and,
// taking an idle one on return, wake sysmon: a sched_switch profile of
// tcp_bw 128K showed both sides' sysmon threads sleeping and waking
// thousands of times a second, each time taking a CPU from a 2-CPU host's
// sender or receiver (docs/engine.md). A write cut short (the preemption signal
// the runtime then sends every ~10 ms) is finished by the next call before
// a new block starts, as iperf3 finishes a partial one.
func tcpBWLoop(s *stream, size int, phase *atomic.Int32) error {
	buf := payload(size)
	fd, w := s.fd, s.where
	off := 0
	for {
		ph := phase.Load()
		if ph == phStop {
			return nil
		}
		n, err := sysWrite(fd, buf[off:])
		if err != nil {
			if err == unix.EINTR || isTimeout(err) {
				continue
			}
			return err
		}
		if off += n; off == size {
			off = 0
		}
		if ph == phMeasure {
			s.bytes += int64(n)
		}
		w.tick(int64(n))
	}
}

// payload returns a size-byte buffer written through once. A buffer never
// written may still be backed by the kernel's shared zero page, which every
// copy would read from one cached page; iperf3 fills its own (with random
// bytes). The content itself is never looked at.
func payload(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}

// udpBatch is how many datagrams one sendmmsg call carries.
const udpBatch = 64

func udpBWLoop(s *stream, size int, rateBps float64, phase *atomic.Int32) error {
	b := newBatch(udpBatch, size)
	fd, w := s.fd, s.where
	var seq, mseq uint64
	pps := rateBps / 8 / float64(size)
	var rateStart int64
	var rateSent int64
	withTS := size >= udpHdrTS
	for {
		ph := phase.Load()
		if ph == phStop {
			return nil
		}
		if ph == phPause {
			// The rate restarts with the measured phase: no catch-up burst.
			rateStart, rateSent = 0, 0
			time.Sleep(50 * time.Microsecond)
			continue
		}
		n := udpBatch
		if pps > 0 {
			now := nanotime()
			if rateStart == 0 {
				rateStart = now
			}
			allowed := int64(float64(now-rateStart)*pps/1e9) - rateSent
			if allowed <= 0 {
				// Sleep about one datagram's worth, at least the timer's grain.
				time.Sleep(time.Duration(max(1e9/pps, 50e3)))
				continue
			}
			n = int(min(allowed, udpBatch))
		}
		for k := 0; k < n; k++ {
			var ts int64
			if withTS {
				ts = nanotime()
			}
			if ph == phMeasure {
				putUDPHdr(b.bufs[k], (mseq+uint64(k))|measuredBit, ts)
			} else {
				putUDPHdr(b.bufs[k], seq+uint64(k), ts)
			}
		}
		sent, err := sendmmsg(fd, b, n)
		if err != nil {
			if err == unix.EINTR || err == unix.ECONNREFUSED || err == unix.ENOBUFS || isTimeout(err) {
				continue
			}
			return err
		}
		rateSent += int64(sent)
		w.tick(int64(sent))
		if ph == phMeasure {
			mseq += uint64(sent)
			s.sent += int64(sent)
			s.bytes += int64(sent) * int64(size)
		} else {
			seq += uint64(sent)
		}
	}
}

// awaitEOF reads until the peer's FIN. Anything else is a protocol error.
func awaitEOF(fd int, b []byte) error {
	for {
		n, err := unix.Read(fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n > 0:
			return errors.New("tcp_crr: the server sent more than the response")
		}
		return nil
	}
}
