package engine

import (
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawSyscalls makes the latency loops call read/write through RawSyscall,
// skipping the runtime's entersyscall/exitsyscall bookkeeping: measured
// about 10% off the one-way mean of a 1-byte TCP ping-pong on a veth pair
// (see docs/engine.md). The price is that a loop blocked in the kernel keeps its
// P, so whoever starts such loops raises GOMAXPROCS (reserveProcs).
// CNIBENCH_RAW=0 turns it off, to measure the difference.
var rawSyscalls = os.Getenv("CNIBENCH_RAW") != "0"

var (
	procsMu   sync.Mutex
	procsUsed int // loops that may hold a P while blocked
	procsBase = runtime.GOMAXPROCS(0)
)

// reserveProcs makes room for n more loops that hold their P while blocked,
// keeping the runtime's own Ps for everything else. It returns the release.
// GOMAXPROCS only grows: changing it stops the world, which would disturb
// other sessions' measurements if done at every session's end.
func reserveProcs(n int) func() {
	if !rawSyscalls {
		return func() {}
	}
	procsMu.Lock()
	defer procsMu.Unlock()
	procsUsed += n
	if want := procsBase + procsUsed + 1; want > runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(want)
	}
	return func() {
		procsMu.Lock()
		procsUsed -= n
		procsMu.Unlock()
	}
}

func sysRead(fd int, b []byte) (int, error) {
	if !rawSyscalls {
		return unix.Read(fd, b)
	}
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return int(r), e
	}
	return int(r), nil
}

func sysWrite(fd int, b []byte) (int, error) {
	if !rawSyscalls {
		return unix.Write(fd, b)
	}
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return int(r), e
	}
	return int(r), nil
}
