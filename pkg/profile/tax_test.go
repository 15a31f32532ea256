package profile

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/stats"
)

// BenchmarkProfilerTax measures what sampling every CPU costs a CPU-bound
// workload — the situation of tcp_bw, where both CPUs are busy — without
// the noise of a network test: a fixed amount of arithmetic on every CPU,
// timed with and without the profiler running, alternated 20 times per
// iteration. It reports the ratio of medians (profiled / plain) and its
// bootstrap 95% interval; the overhead target (issue 12) is ≤ 1.03.
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
	work := func() time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for c := 0; c < ncpu; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				x := uint64(88172645463325252)
				for i := 0; i < 30_000_000; i++ { // ~45 ms on an idle CPU here
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
				}
				sinkTax.Store(x)
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	var plain, profiled []float64
	for i := 0; i < b.N; i++ {
		for r := 0; r < 20; r++ {
			plain = append(plain, float64(work()))
			if err := sess.Start(); err != nil {
				b.Fatal(err)
			}
			profiled = append(profiled, float64(work()))
			p, err := sess.Stop()
			if err != nil {
				b.Fatal(err)
			}
			if p.Samples == 0 {
				b.Fatal("the profiler took no samples")
			}
		}
	}
	ratio := stats.RatioOfMedians(profiled, plain)
	b.ReportMetric(ratio.Value, "profiled/plain")
	b.ReportMetric(ratio.CI.Low, "ci_low")
	b.ReportMetric(ratio.CI.High, "ci_high")
	b.Logf("%d CPUs, %d pairs: plain median %v, profiled %v, ratio %.4f [%.4f, %.4f], p=%.3g",
		ncpu, len(plain), time.Duration(stats.Median(plain)), time.Duration(stats.Median(profiled)),
		ratio.Value, ratio.CI.Low, ratio.CI.High, stats.MannWhitney(plain, profiled).P)
}

var sinkTax atomicUint64

type atomicUint64 struct {
	mu sync.Mutex
	v  uint64
}

func (a *atomicUint64) Store(v uint64) { a.mu.Lock(); a.v = v; a.mu.Unlock() }
