package sockperf

import (
	"math"
	"testing"

	"github.com/cnibench/cnibench/internal/fuzzseed"
)

// FuzzParseReport: sockperf's text output, however truncated or garbled,
// parses into finite, non-negative figures or is refused.
func FuzzParseReport(f *testing.F) {
	fuzzseed.AddFiles(f, "testdata/*.txt")
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ParseReport(in)
		if err != nil {
			return
		}
		for name, v := range map[string]float64{"avg": r.Avg, "stddev": r.StdDev, "valid_seconds": r.ValidSeconds, "warmup_ms": r.WarmupMs} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("%s parsed as %v", name, v)
			}
		}
		if r.ValidSent < 0 || r.ValidReceived < 0 || r.Dropped < 0 {
			t.Fatalf("negative counts: %+v", r)
		}
	})
}
