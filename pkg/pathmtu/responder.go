package pathmtu

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Responder is the server side of a probe where no `cnibench server` runs:
// it answers probes on a UDP port and accepts the MSS reading's TCP
// connections on the same port, until Close. A lab starts one in its
// server's namespace for as long as an arm's path is probed.
type Responder struct {
	udp net.PacketConn
	tcp net.Listener
	wg  sync.WaitGroup
}

// ErrInUse is wrapped by Respond when the address is taken: something (a
// cnibench server, which answers probes itself) already listens there.
var ErrInUse = errors.New("address in use")

// Respond listens on addr (IPv4:PORT, UDP and TCP) in the named namespace
// ("" = this one) and serves until Close.
func Respond(ns, addr string) (*Responder, error) {
	r := &Responder{}
	err := inNetns(ns, func() error {
		var err error
		if r.udp, err = net.ListenPacket("udp4", addr); err != nil {
			return err
		}
		if r.tcp, err = net.Listen("tcp4", addr); err != nil {
			r.udp.Close()
		}
		return err
	})
	if err != nil {
		if errors.Is(err, unix.EADDRINUSE) {
			err = fmt.Errorf("%w: %w", ErrInUse, err)
		}
		return nil, fmt.Errorf("path MTU responder on %s: %w", addr, err)
	}
	r.wg.Add(2)
	go r.serveUDP()
	go r.serveTCP()
	return r, nil
}

// Close stops both listeners and waits for their loops.
func (r *Responder) Close() error {
	err := errors.Join(r.udp.Close(), r.tcp.Close())
	r.wg.Wait()
	return err
}

func (r *Responder) serveUDP() {
	defer r.wg.Done()
	buf := make([]byte, maxPacket)
	for {
		n, from, err := r.udp.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if a, ok := Answer(buf[:n], n); ok {
			_, _ = r.udp.WriteTo(a, from)
		}
	}
}

// serveTCP accepts connections and holds each until its client closes it
// (the client reads the MSS and closes first), for at most a few seconds.
func (r *Responder) serveTCP() {
	defer r.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := r.tcp.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(3 * time.Second))
			_, _ = io.Copy(io.Discard, c)
		}()
	}
}
