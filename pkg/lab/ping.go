package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/cnibench/cnibench/pkg/netns"
	"golang.org/x/sys/unix"
)

// ping sends ICMP echo requests from namespace ns to dst, one every 20 ms,
// until one is answered or timeout passes: `ping -c1 -w` from a pod, the
// last readiness check of a lab whose datapath is programmed
// asynchronously (the first packets can meet a switch still learning
// where the other end is).
func ping(ctx context.Context, ns string, dst net.IP, timeout time.Duration) error {
	return netns.Do(ns, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			return fmt.Errorf("icmp socket: %w", err)
		}
		defer unix.Close(fd)
		// OVS's userspace tunnel drops the first packet to a remote
		// endpoint whose MAC it has not learnt yet (it sends an ARP
		// instead): resending soon saves most of a retry interval.
		const every = 20 * time.Millisecond
		tv := unix.NsecToTimeval(every.Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		to := &unix.SockaddrInet4{}
		copy(to.Addr[:], dst.To4())
		id := uint16(os.Getpid())
		deadline := time.Now().Add(timeout)
		buf := make([]byte, 1500)
		for seq := uint16(1); time.Now().Before(deadline); seq++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := unix.Sendto(fd, echoRequest(id, seq), 0, to); err != nil && !errors.Is(err, unix.EHOSTUNREACH) {
				return fmt.Errorf("send echo: %w", err)
			}
			sent := time.Now()
			for time.Since(sent) < every {
				n, from, err := unix.Recvfrom(fd, buf, 0)
				if err != nil {
					break // the receive timeout: send the next one
				}
				f, ok := from.(*unix.SockaddrInet4)
				if !ok || !net.IP(f.Addr[:]).Equal(dst) || n < 28 {
					continue
				}
				ihl := int(buf[0]&0x0f) * 4
				if n < ihl+8 {
					continue
				}
				icmp := buf[ihl:n]
				// An echo reply (type 0) to this id.
				if icmp[0] == 0 && binary.BigEndian.Uint16(icmp[4:]) == id {
					return nil
				}
			}
		}
		return fmt.Errorf("no echo reply within %v", timeout)
	})
}

// echoRequest is an ICMP echo request with its checksum.
func echoRequest(id, seq uint16) []byte {
	b := make([]byte, 16)
	b[0] = 8 // echo request
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:], "cnibench")
	var sum uint32
	for i := 0; i < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(b[2:], ^uint16(sum))
	return b
}
