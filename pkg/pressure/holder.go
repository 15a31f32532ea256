package pressure

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// holder keeps flows established: it opens them, then pings each one in
// turn (one byte the server echoes), so every flow carries traffic and
// stays live in every conntrack table on the path, and a flow the datapath
// stopped carrying shows as stalled.
type holder struct {
	srcs     []netip.Addr
	dst      netip.AddrPort
	interval time.Duration // each flow is pinged once per interval
	stall    time.Duration // a ping unanswered this long: the flow is stalled

	stop atomic.Bool
	// What the holder reports, read by the run between steps.
	established, openFailed atomic.Int64
	// Why opening failed: no answer in openTimeout, an error from the
	// connect (refused, reset), or no socket or port on the client.
	openTimedOut, openRefused, openClient atomic.Int64
	broken, stalled                       atomic.Int64
	pings, echoes                         atomic.Int64
	opened                                chan struct{} // closed when the opening phase ends
	openTime                              time.Duration
}

const (
	openWindow  = 1024            // connects in flight while opening
	openTimeout = 3 * time.Second // one SYN retransmission fits
	holdTick    = 50 * time.Millisecond
)

// run opens n flows and holds them until stop; it closes all of them
// before it returns. It runs on a thread in the client's namespace.
func (h *holder) run(n int) error {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		close(h.opened)
		return err
	}
	defer unix.Close(ep)
	var fds []int
	defer func() {
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	idx := map[int]int{} // fd → index in fds
	evs := make([]unix.EpollEvent, 1024)
	buf := make([]byte, 256)

	// Opening: at most openWindow connects in flight.
	t0 := time.Now()
	opening := map[int]time.Time{}
	started := 0
	for (started < n || len(opening) > 0) && !h.stop.Load() {
		for started < n && len(opening) < openWindow {
			started++
			fd, err := dial(h.srcs[started%len(h.srcs)], h.dst)
			if err != nil {
				h.openFailed.Add(1)
				h.openClient.Add(1) // EMFILE, EADDRNOTAVAIL: the client's own limits
				continue
			}
			if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLOUT, Fd: int32(fd)}); err != nil {
				unix.Close(fd)
				h.openFailed.Add(1)
				continue
			}
			opening[fd] = time.Now()
		}
		k, err := unix.EpollWait(ep, evs, 10)
		if err != nil && !errors.Is(err, unix.EINTR) {
			close(h.opened)
			return err
		}
		for _, ev := range evs[:max(k, 0)] {
			fd := int(ev.Fd)
			if _, ok := opening[fd]; !ok {
				continue
			}
			delete(opening, fd)
			soerr, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if soerr != 0 || ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
				unix.Close(fd)
				h.openFailed.Add(1)
				if unix.Errno(soerr) == unix.ETIMEDOUT {
					h.openTimedOut.Add(1)
				} else {
					h.openRefused.Add(1)
				}
				continue
			}
			unix.EpollCtl(ep, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
			idx[fd] = len(fds)
			fds = append(fds, fd)
			h.established.Add(1)
		}
		now := time.Now()
		for fd, at := range opening {
			if now.Sub(at) > openTimeout {
				delete(opening, fd)
				unix.Close(fd)
				h.openFailed.Add(1)
				h.openTimedOut.Add(1)
			}
		}
	}
	h.openTime = time.Since(t0)
	close(h.opened)

	// Holding: ping a slice of the flows every tick.
	sent := make([]time.Time, len(fds)) // zero: no ping outstanding
	next := 0
	perTick := 1
	if len(fds) > 0 {
		perTick = max(1, int(int64(len(fds))*int64(holdTick)/int64(h.interval)))
	}
	ping := []byte{reqPing}
	lastTick := time.Time{}
	for !h.stop.Load() {
		now := time.Now()
		if now.Sub(lastTick) >= holdTick && len(fds) > 0 {
			lastTick = now
			for i := 0; i < perTick; i++ {
				j := next
				next = (next + 1) % len(fds)
				if fds[j] < 0 || !sent[j].IsZero() {
					continue
				}
				if _, err := unix.Write(fds[j], ping); err != nil {
					continue // counted as stalled if the echo never comes
				}
				sent[j] = now
				h.pings.Add(1)
			}
			var st int64
			for j := range fds {
				if fds[j] >= 0 && !sent[j].IsZero() && now.Sub(sent[j]) > h.stall {
					st++
				}
			}
			h.stalled.Store(st)
		}
		k, err := unix.EpollWait(ep, evs, int(holdTick/time.Millisecond))
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		for _, ev := range evs[:max(k, 0)] {
			fd := int(ev.Fd)
			j, ok := idx[fd]
			if !ok {
				continue
			}
			m, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EAGAIN) {
				continue
			}
			if err != nil || m <= 0 {
				unix.Close(fd)
				fds[j] = -1
				delete(idx, fd)
				h.broken.Add(1)
				continue
			}
			sent[j] = time.Time{}
			h.echoes.Add(int64(m))
		}
	}
	return nil
}
