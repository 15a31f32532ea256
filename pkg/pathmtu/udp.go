package pathmtu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// udpProber sends don't-fragment UDP probes on one connected socket and
// reads what comes back: the answer, or an error the kernel queued for
// it (IP_RECVERR: the router's ICMP, or the kernel's own EMSGSIZE).
//
// The socket uses IP_PMTUDISC_PROBE rather than IP_PMTUDISC_DO: both set
// DF, but DO refuses sizes above the path MTU the kernel has cached for
// the target (from an earlier probe or connection), so a size the path
// carries again could never be tried; PROBE is bounded by the link's MTU
// alone. An ICMP frag-needed still updates the kernel's cached path MTU,
// which IP_MTU then reads.
type udpProber struct {
	fd      int
	timeout time.Duration
	id      uint32
	buf     []byte // the probe being sent
	rbuf    []byte // an answer, or the quoted start of an errored probe
	oob     []byte
}

// maxPacket is the largest IPv4 packet: a probe never exceeds it, even on
// a link (loopback) whose MTU does.
const maxPacket = 65535

func openUDP(target netip.AddrPort, timeout time.Duration) (*udpProber, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("udp socket: %w", err)
	}
	u := &udpProber{fd: fd, timeout: timeout, buf: make([]byte, maxPacket-ipUDPHeaders),
		rbuf: make([]byte, 2048), oob: make([]byte, 512)}
	for _, o := range []struct {
		name     string
		opt, val int
	}{{"IP_MTU_DISCOVER", unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_PROBE}, {"IP_RECVERR", unix.IP_RECVERR, 1}} {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, o.opt, o.val); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("setsockopt %s: %w", o.name, err)
		}
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(target.Port()), Addr: target.Addr().As4()}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("connect udp %s: %w", target, err)
	}
	return u, nil
}

func (u *udpProber) close() { unix.Close(u.fd) }

// kernelPMTU is the path MTU the kernel holds for the connected target.
func (u *udpProber) kernelPMTU() (int, error) {
	return unix.GetsockoptInt(u.fd, unix.IPPROTO_IP, unix.IP_MTU)
}

// linkMTU is the MTU of the link the kernel sends to the target on: a
// send of the largest packet is refused with EMSGSIZE and the MTU (no
// packet leaves) unless the link carries it (loopback), and then that
// probe is an ordinary one whose reply is returned too.
func (u *udpProber) linkMTU() (int, *reply, error) {
	r, err := u.probe(maxPacket)
	if err != nil {
		return 0, nil, err
	}
	if r.kind == localTooBig {
		return r.mtu, nil, nil
	}
	return maxPacket, &r, nil
}

// probe implements prober.
func (u *udpProber) probe(size int) (reply, error) {
	u.id++
	msg := u.buf[:size-ipUDPHeaders]
	encodeProbe(msg, u.id, size)
	u.drainErrors()
	if _, err := unix.Write(u.fd, msg); err != nil {
		if errors.Is(err, unix.EMSGSIZE) {
			// ip_local_error queued the link's MTU with it.
			for {
				ee, _, ok := u.readError()
				if !ok {
					break
				}
				if ee.Origin == unix.SO_EE_ORIGIN_LOCAL && ee.Errno == uint32(unix.EMSGSIZE) {
					return reply{localTooBig, int(ee.Info)}, nil
				}
			}
			mtu, _ := u.kernelPMTU()
			return reply{localTooBig, mtu}, nil
		}
		return reply{}, sendError(err)
	}
	deadline := time.Now().Add(u.timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return reply{kind: lost}, nil
		}
		fds := []unix.PollFd{{Fd: int32(u.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) || n == 0 {
			continue
		}
		if err != nil {
			return reply{}, fmt.Errorf("poll: %w", err)
		}
		if fds[0].Revents&unix.POLLERR != 0 {
			ee, id, ok := u.readError()
			if !ok || id != u.id {
				continue // about an earlier probe, or not ours
			}
			if r, err := icmpReply(ee); err != nil || r.kind != lost {
				return r, err
			}
			continue
		}
		m, err := unix.Read(u.fd, u.rbuf)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return reply{}, sendError(err)
		}
		id, got, ok := parseAnswer(u.rbuf[:m])
		if ok && id == u.id && got == len(msg) {
			return reply{kind: answered}, nil
		}
		// A late answer to an earlier probe, or something else: wait on.
	}
}

// icmpReply turns an ICMP error about the current probe into its reply;
// lost for one that says nothing about this probe's size.
func icmpReply(ee *unix.SockExtendedErr) (reply, error) {
	if ee.Origin != unix.SO_EE_ORIGIN_ICMP || ee.Type != 3 { // destination unreachable
		return reply{kind: lost}, nil
	}
	switch ee.Code {
	case 4: // fragmentation needed and DF set
		return reply{icmpTooBig, int(ee.Info)}, nil
	case 3: // port unreachable
		return reply{}, ErrRefused
	}
	return reply{}, fmt.Errorf("%w (ICMP destination unreachable, code %d)", ErrUnreachable, ee.Code)
}

// sendError names a socket error's meaning for the probe.
func sendError(err error) error {
	switch {
	case errors.Is(err, unix.ECONNREFUSED):
		return ErrRefused
	case errors.Is(err, unix.EHOSTUNREACH), errors.Is(err, unix.ENETUNREACH):
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	return fmt.Errorf("udp probe: %w", err)
}

// readError takes one error off the socket's error queue: the extended
// error and, when the datagram it is about is quoted, that probe's id.
func (u *udpProber) readError() (*unix.SockExtendedErr, uint32, bool) {
	n, oobn, _, _, err := unix.Recvmsg(u.fd, u.rbuf, u.oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
	if err != nil {
		return nil, 0, false
	}
	msgs, err := unix.ParseSocketControlMessage(u.oob[:oobn])
	if err != nil {
		return nil, 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_RECVERR {
			ee, err := parseExtendedErr(m.Data)
			if err != nil {
				return nil, 0, false
			}
			id, _ := probeID(u.rbuf[:n])
			return ee, id, true
		}
	}
	return nil, 0, false
}

// drainErrors drops errors queued for earlier probes, so the next probe
// reads only its own.
func (u *udpProber) drainErrors() {
	for {
		if _, _, ok := u.readError(); !ok {
			return
		}
	}
}

// parseExtendedErr reads a struct sock_extended_err (linux/errqueue.h)
// from an IP_RECVERR control message.
func parseExtendedErr(b []byte) (*unix.SockExtendedErr, error) {
	const size = 16 // u32 errno, u8 origin, type, code, pad, u32 info, data
	if len(b) < size {
		return nil, fmt.Errorf("IP_RECVERR message of %d bytes, want %d", len(b), size)
	}
	return &unix.SockExtendedErr{Errno: binary.NativeEndian.Uint32(b), Origin: b[4], Type: b[5], Code: b[6], Pad: b[7],
		Info: binary.NativeEndian.Uint32(b[8:]), Data: binary.NativeEndian.Uint32(b[12:])}, nil
}
