package profile

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/stats"
)

// BenchmarkProfilerTax measures what sampling every CPU costs CPU-bound
// work — the situation of tcp_bw, where both CPUs are busy — without the
// noise of a network test: a fixed amount of arithmetic on every CPU, with
// and without the profiler running, alternated 20 times per iteration.
//
// It counts CPU time, not wall time, so other processes on a shared host do
// not swamp it: each worker's thread CPU time (CLOCK_THREAD_CPUTIME_ID; this
// kernel has no IRQ_TIME_ACCOUNTING, so the sampling interrupts are charged
// to the thread they interrupt) plus, when profiling, this process's other
// CPU time — the goroutines that read the ring buffers and fold the stacks.
// It reports the ratio of medians (profiled / plain) with its bootstrap 95%
// interval; issue 12's target is ≤ 1.03.
//
//	sudo go test -run '^$' -bench ProfilerTax -benchtime 1x ./pkg/profile
func BenchmarkProfilerTax(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root (system-wide perf events)")
	}
	sess, err := Open(Options{})
	if err != nil {
		b.Skip(err)
	}
	defer sess.Close()
	ncpu := runtime.NumCPU()
	// pass runs the work on every CPU and returns the workers' CPU time and
	// the whole process's.
	pass := func() (workers, process time.Duration) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		p0 := processCPU()
		for c := 0; c < ncpu; c++ {
			wg.Add(1)
			go func(cpu int) {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				t0 := threadCPU()
				x := uint64(88172645463325252) + uint64(cpu)
				for i := 0; i < 30_000_000; i++ { // ~45 ms of CPU here
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
				}
				d := threadCPU() - t0
				mu.Lock()
				workers += d
				taxSink ^= x
				mu.Unlock()
			}(c)
		}
		wg.Wait()
		return workers, processCPU() - p0
	}
	var plain, profiled, reader []float64
	for i := 0; i < b.N; i++ {
		for r := 0; r < 20; r++ {
			w, _ := pass()
			plain = append(plain, float64(w))
			if err := sess.Start(); err != nil {
				b.Fatal(err)
			}
			w, p := pass()
			prof, err := sess.Stop()
			if err != nil {
				b.Fatal(err)
			}
			if prof.Samples == 0 {
				b.Fatal("the profiler took no samples")
			}
			// The reader's CPU is the process's beyond the workers'.
			profiled = append(profiled, float64(p))
			reader = append(reader, float64(p-w))
		}
	}
	ratio := stats.RatioOfMedians(profiled, plain)
	b.ReportMetric(ratio.Value, "profiled/plain")
	b.ReportMetric(ratio.CI.Low, "ci_low")
	b.ReportMetric(ratio.CI.High, "ci_high")
	b.Logf("%d CPUs, %d pairs: workers' CPU plain %v, profiled (workers + reader) %v, of which reader %v; ratio %.4f [%.4f, %.4f] (p=%.3g)",
		ncpu, len(plain), time.Duration(stats.Median(plain)), time.Duration(stats.Median(profiled)), time.Duration(stats.Median(reader)),
		ratio.Value, ratio.CI.Low, ratio.CI.High, stats.MannWhitney(plain, profiled).P)
}

var taxSink uint64

func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func processCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}
