package pressure

import (
	"errors"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// The client end of the load, both loops on threads in the client's
// namespace: the holder keeps N flows established and pings each in turn,
// the generator opens new connections at a set rate (open loop: a
// connection is started when it is due, whether or not earlier ones have
// finished, up to a cap of connections in flight).

// dial starts a non-blocking connect to dst; EINPROGRESS is the normal
// answer. The socket is in the calling thread's namespace.
//
// src, when valid, is the source address: bound with
// IP_BIND_ADDRESS_NO_PORT, so the port is still chosen at connect() for the
// whole 4-tuple (a plain bind would pick it for the address alone).
func dial(src netip.Addr, dst netip.AddrPort) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if src.IsValid() {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src.As4()}); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()})
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// threadCPU is the calling thread's CPU time (user + system).
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// StepCounts is what the generator saw in one step.
type StepCounts struct {
	// Attempted connects were started; Completed got their answer.
	Attempted int64 `json:"attempted"`
	Completed int64 `json:"completed"`
	// TimedOut got no answer within the connect timeout (a dropped SYN is
	// sent again only after 1 s); Refused, Reset: the server side said no.
	TimedOut int64 `json:"timed_out"`
	Refused  int64 `json:"refused"`
	Reset    int64 `json:"reset"`
	// AddrNotAvail: connect found no free source port (a client limit).
	AddrNotAvail int64 `json:"addr_not_avail"`
	OtherErrors  int64 `json:"other_errors"`
	// Capped connections were due but not started: the cap of
	// connections in flight was reached (a client limit).
	Capped int64 `json:"capped"`
	// Lat holds each completed transaction's time (connect, request,
	// response), in nanoseconds.
	Lat []int64 `json:"-"`
	// Wall is the step's time including the drain after it; CPU the
	// generator thread's CPU over it.
	Wall time.Duration `json:"-"`
	CPU  time.Duration `json:"-"`
}

type pending struct {
	start time.Time
	seq   uint64
	sent  bool
}

type deadline struct {
	fd  int
	seq uint64
	at  time.Time
}

// generate runs one step: rate new connections per second for dur, then
// waits for the ones in flight to finish or time out.
func generate(srcs []netip.Addr, dst netip.AddrPort, rate float64, dur, timeout time.Duration, maxInflight int) (StepCounts, error) {
	var c StepCounts
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return c, err
	}
	defer unix.Close(ep)
	inflight := map[int]*pending{}
	var fifo []deadline
	var seq uint64
	defer func() {
		for fd := range inflight {
			unix.Close(fd)
		}
	}()
	finish := func(fd int) {
		delete(inflight, fd)
		unix.Close(fd)
	}
	evs := make([]unix.EpollEvent, 1024)
	buf := make([]byte, 64)
	req := []byte{reqCRR}
	cpu0 := threadCPU()
	start := time.Now()
	end := start.Add(dur)
	var due int64
	for {
		now := time.Now()
		if now.Before(end) {
			due = int64(rate * now.Sub(start).Seconds())
			for c.Attempted+c.Capped < due {
				if len(inflight) >= maxInflight {
					c.Capped += due - c.Attempted - c.Capped
					break
				}
				c.Attempted++
				fd, err := dial(srcs[c.Attempted%int64(len(srcs))], dst)
				if err != nil {
					switch {
					case errors.Is(err, unix.EADDRNOTAVAIL):
						c.AddrNotAvail++
					case errors.Is(err, unix.ECONNREFUSED):
						c.Refused++
					default:
						c.OtherErrors++
					}
					continue
				}
				if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLIN, Fd: int32(fd)}); err != nil {
					unix.Close(fd)
					c.OtherErrors++
					continue
				}
				seq++
				inflight[fd] = &pending{start: now, seq: seq}
				fifo = append(fifo, deadline{fd: fd, seq: seq, at: now.Add(timeout)})
			}
		} else if len(inflight) == 0 {
			break
		}
		// Expired connections, oldest first.
		k := 0
		for ; k < len(fifo) && !now.Before(fifo[k].at); k++ {
			if p, ok := inflight[fifo[k].fd]; ok && p.seq == fifo[k].seq {
				c.TimedOut++
				finish(fifo[k].fd)
			}
		}
		fifo = fifo[k:]
		n, err := unix.EpollWait(ep, evs, 1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return c, err
		}
		for _, ev := range evs[:n] {
			fd := int(ev.Fd)
			p, ok := inflight[fd]
			if !ok {
				continue
			}
			if ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) != 0 && ev.Events&unix.EPOLLIN == 0 {
				soerr, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
				switch unix.Errno(soerr) {
				case unix.ECONNREFUSED:
					c.Refused++
				case unix.ECONNRESET:
					c.Reset++
				case unix.ETIMEDOUT:
					c.TimedOut++
				default:
					c.OtherErrors++
				}
				finish(fd)
				continue
			}
			if !p.sent && ev.Events&unix.EPOLLOUT != 0 {
				if _, err := unix.Write(fd, req); err != nil {
					c.Reset++
					finish(fd)
					continue
				}
				p.sent = true
				unix.EpollCtl(ep, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
			}
			if ev.Events&unix.EPOLLIN != 0 {
				m, err := unix.Read(fd, buf)
				if errors.Is(err, unix.EAGAIN) {
					continue
				}
				if err != nil || m <= 0 {
					c.Reset++
				} else {
					c.Completed++
					c.Lat = append(c.Lat, int64(time.Since(p.start)))
				}
				finish(fd)
			}
		}
	}
	c.Wall = time.Since(start)
	c.CPU = threadCPU() - cpu0
	return c, nil
}

// percentile returns the q-quantile (0..1) of xs by the nearest rank; xs
// is sorted in place. ok is false for no samples.
func percentile(xs []int64, q float64) (int64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	if !slices.IsSorted(xs) {
		slices.Sort(xs)
	}
	i := int(q*float64(len(xs))+0.5) - 1
	i = max(0, min(i, len(xs)-1))
	return xs[i], true
}
