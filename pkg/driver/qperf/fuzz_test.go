package qperf

import (
	"math"
	"testing"

	"github.com/cnibench/cnibench/internal/fuzzseed"
)

// FuzzParseBlocks: any output qperf (or a broken pipe) can produce parses or
// is refused; a parsed number is never NaN or infinite, so a garbled line
// cannot become a measured value.
func FuzzParseBlocks(f *testing.F) {
	fuzzseed.AddFiles(f, "testdata/*.txt")
	f.Fuzz(func(t *testing.T, in []byte) {
		blocks, err := ParseBlocks(in)
		if err != nil {
			return
		}
		for _, b := range blocks {
			for name, fl := range b.Fields {
				if math.IsNaN(fl.Value) || math.IsInf(fl.Value, 0) {
					t.Fatalf("%s.%s parsed as %v", b.Test, name, fl.Value)
				}
			}
		}
	})
}
