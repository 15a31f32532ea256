package engine

import (
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// The server loops' one decision on a failed read: read again only for a
// transient error while the session runs; ECONNREFUSED only on UDP.
func TestReadAgain(t *testing.T) {
	var running, stopped atomic.Bool
	stopped.Store(true)
	for _, c := range []struct {
		name string
		err  error
		udp  bool
		stop *atomic.Bool
		want bool
	}{
		{"no error", nil, false, &running, false},
		{"no error after stop", nil, true, &stopped, false},
		{"timeout", unix.EAGAIN, false, &running, true},
		{"timeout after stop", unix.EAGAIN, false, &stopped, false},
		{"signal", unix.EINTR, true, &running, true},
		{"signal after stop", unix.EINTR, true, &stopped, false},
		{"ICMP error on UDP", unix.ECONNREFUSED, true, &running, true},
		{"refused on TCP", unix.ECONNREFUSED, false, &running, false},
		{"reset", unix.ECONNRESET, false, &running, false},
	} {
		if got := readAgain(c.err, c.udp, c.stop); got != c.want {
			t.Errorf("%s: readAgain(%v, udp=%v) = %v, want %v", c.name, c.err, c.udp, got, c.want)
		}
	}
}
