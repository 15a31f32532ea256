package drivertest

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// Golden reads testdata/name of the calling package's directory.
func Golden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Near fails t unless got is set and within relative tolerance rel of want.
// Parsed figures are compared this way because a tool's decimal output goes
// through float arithmetic (unit scaling) on its way into a result.
func Near(t testing.TB, what string, got *float64, want, rel float64) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil, want %v", what, want)
	}
	if math.Abs(*got-want) > rel*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s = %v, want %v", what, *got, want)
	}
}
