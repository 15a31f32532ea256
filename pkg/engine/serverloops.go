// The server's hot loops, one per data connection or UDP peer: echo for
// the latency tests, count-and-discard for the streams. They read and write
// through RawSyscall for the reason the client's loops do (rawsys.go).

package engine

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

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
