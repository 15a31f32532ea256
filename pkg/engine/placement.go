package engine

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/sysinfo"
	"golang.org/x/sys/unix"
)

// Where each side's measuring threads ran (result.CPUSide.RanOn), pinned or
// not. Every hot loop feeds a cpuSampler what it did (transactions, bytes,
// datagrams); once per sampling period it asks the kernel which CPU the
// thread is on and counts one sample for that CPU. The marks that take the
// CPU figures also sum the counts, so the shares cover the same interval.
//
// The question is a raw getcpu(2) syscall: Go reaches the vDSO only for its
// clock, and RDPID would need assembly. A raw syscall costs about what the
// loops' own read or write does before any data moves (getpid through
// RawSyscall: 219 ns on this project's VM, docs/engine.md), so it is asked
// once per sampling period, many iterations long, and costs the loop one
// subtraction and one branch the rest of the time. The overhead measured
// against the engine without sampling is in docs/engine.md.

// Sampling periods, in the unit each loop feeds its sampler. At the rates
// docs/engine.md reports for this project's VM (tcp_lat ~45,000
// transactions/s, tcp_crr ~5,000/s, tcp_bw 10–25 Gb/s, udp_bw ~280,000
// datagrams/s) a one-second interval holds about 700, 600, 1,200–3,000 and
// 1,100 samples per stream.
const (
	// sampleTxns: tcp_lat and udp_lat transactions and echoes.
	sampleTxns = 64
	// sampleCRR: tcp_crr transactions, about ten times slower.
	sampleCRR = 8
	// sampleBytes: tcp_bw bytes written or read, counted in bytes rather
	// than calls because a read returns whatever is queued.
	sampleBytes = 1 << 20
	// sampleDatagrams: udp_bw datagrams sent or received (4 full batches).
	sampleDatagrams = 4 * udpBatch
)

// fallbackCPUs sizes the counts when the possible CPUs cannot be read; a
// sample on a higher CPU then makes RanOn missing rather than wrong.
const fallbackCPUs = 1024

// cpuSampler counts on which CPUs one loop's thread ran.
type cpuSampler struct {
	// left is what remains of the current sampling period and cpu is
	// getcpu's answer; only the loop that owns the sampler touches them
	// (tick), or tickShared under mu.
	left   int64
	cpu    uint32
	period int64
	mu     sync.Mutex

	counts []atomic.Uint64 // samples per CPU number
	beyond atomic.Uint64   // samples on a CPU number past counts
	errno  atomic.Uintptr  // the last failed getcpu's errno
}

// newSampler returns a sampler for cpus CPU numbers that samples once per
// period units of work, the first time at its first tick.
func newSampler(cpus int, period int64) *cpuSampler {
	return &cpuSampler{period: period, counts: make([]atomic.Uint64, cpus)}
}

// tick feeds the sampler n units of work done by its own loop's thread.
// Inlined into the loops: one subtraction and one branch per call.
func (c *cpuSampler) tick(n int64) {
	if c.left -= n; c.left < 0 {
		c.sample()
	}
}

// tickShared is tick for a sampler fed from several goroutines at once
// (tcp_crr's server answers on the accept loop and on short-lived
// goroutines). Its callers are far slower than a lock.
func (c *cpuSampler) tickShared() {
	c.mu.Lock()
	c.tick(1)
	c.mu.Unlock()
}

// sample starts a new period and counts the CPU the calling thread runs on
// now. RawSyscall: getcpu never blocks, so the runtime's syscall bookkeeping
// would be pure cost. The answer lands in the sampler (heap), not on the
// stack, which may move under a pointer passed as a uintptr.
//
//go:noinline
func (c *cpuSampler) sample() {
	c.left = c.period - 1
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c.cpu)), 0, 0); e != 0 {
		c.errno.Store(uintptr(e))
		return
	}
	if int(c.cpu) < len(c.counts) {
		c.counts[c.cpu].Add(1)
	} else {
		c.beyond.Add(1)
	}
}

// placement is one side's samplers: one per stream loop, or the tcp_crr
// server's one shared sampler. All exist before any mark reads them.
type placement struct {
	samplers []*cpuSampler
	cpusErr  error // why the counts were sized fallbackCPUs
}

// newPlacement returns n samplers sized for the host's possible CPUs, with
// the sampling period of test.
func newPlacement(fs sysinfo.FS, test string, n int) *placement {
	cpus, err := fs.PossibleCPUs()
	if err != nil {
		cpus = fallbackCPUs
	}
	p := &placement{samplers: make([]*cpuSampler, n), cpusErr: err}
	for i := range p.samplers {
		p.samplers[i] = newSampler(cpus, samplePeriod(test))
	}
	return p
}

// samplePeriod is the sampling period of test's loops, in their unit.
func samplePeriod(test string) int64 {
	switch test {
	case result.TCPCRR:
		return sampleCRR
	case result.TCPBW:
		return sampleBytes
	case result.UDPBW:
		return sampleDatagrams
	}
	return sampleTxns
}

// ranSnap is a side's sample counts at a mark.
type ranSnap struct {
	counts  []uint64 // summed over the side's samplers, per CPU number
	beyond  uint64
	errno   unix.Errno
	cpusErr error
}

// snap sums the samplers' counts.
func (p *placement) snap() ranSnap {
	s := ranSnap{cpusErr: p.cpusErr}
	for _, c := range p.samplers {
		if s.counts == nil {
			s.counts = make([]uint64, len(c.counts))
		}
		for i := range c.counts {
			s.counts[i] += c.counts[i].Load()
		}
		s.beyond += c.beyond.Load()
		if e := c.errno.Load(); e != 0 {
			s.errno = unix.Errno(e)
		}
	}
	return s
}

// ranOn is the share of the samples taken between two snapshots on each CPU,
// largest first (then by CPU number). When there is none, it says why.
func ranOn(a, b ranSnap) ([]result.CPUShare, string) {
	switch {
	case b.errno != 0:
		return nil, fmt.Sprintf("getcpu failed: %v", b.errno)
	case b.beyond > a.beyond:
		why := fmt.Sprintf("a thread ran on a CPU numbered %d or above", len(b.counts))
		if b.cpusErr != nil {
			why += " (" + b.cpusErr.Error() + ")"
		}
		return nil, why
	case len(b.counts) == 0 || len(a.counts) != len(b.counts):
		return nil, "no loop of this side was sampled"
	}
	var total uint64
	for i := range b.counts {
		total += b.counts[i] - a.counts[i]
	}
	if total == 0 {
		return nil, "no placement sample in the measured interval (one is taken per sampling period of each loop; see docs/engine.md)"
	}
	var out []result.CPUShare
	for i := range b.counts {
		if d := b.counts[i] - a.counts[i]; d > 0 {
			out = append(out, result.CPUShare{CPU: i, Pct: 100 * float64(d) / float64(total)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pct > out[j].Pct })
	return out, ""
}
