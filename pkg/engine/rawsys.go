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

// sysRead and sysWrite are the hot loops' read(2) and write(2): raw unless
// CNIBENCH_RAW=0 (see rawSyscalls). b must not be empty.
func sysRead(fd int, b []byte) (int, error)  { return sysIO(unix.SYS_READ, fd, b, rawSyscalls) }
func sysWrite(fd int, b []byte) (int, error) { return sysIO(unix.SYS_WRITE, fd, b, rawSyscalls) }

// sysIO is read(2) (trap SYS_READ) or write(2) (SYS_WRITE) of the non-empty
// b on fd, through RawSyscall when raw, else the runtime's Syscall (what
// unix.Read and unix.Write call).
func sysIO(trap uintptr, fd int, b []byte, raw bool) (int, error) {
	var r uintptr
	var e unix.Errno
	if raw {
		r, _, e = unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	} else {
		r, _, e = unix.Syscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	}
	if e != 0 {
		return int(r), e
	}
	return int(r), nil
}
