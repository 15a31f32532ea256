package drivertest

import (
	"testing"

	"github.com/cnibench/cnibench/internal/fuzzseed"
)

// FuzzParse fuzzes a tool-output parser from the golden files matching glob:
// any input parses or is refused without a panic, and check (nil for none)
// fails t if what did parse holds a value no real output could give.
func FuzzParse[T any](f *testing.F, glob string, parse func([]byte) (T, error), check func(t *testing.T, parsed T)) {
	f.Helper()
	fuzzseed.AddFiles(f, glob)
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := parse(in)
		if err != nil || check == nil {
			return
		}
		check(t, v)
	})
}
