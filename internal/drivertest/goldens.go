package drivertest

import (
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/result"
)

// Goldens is what one driver's parse and command tests share: the driver,
// the port their specs name (each driver package uses its own, so a command
// line in a golden shows which tests wrote it), and the tolerance parsed
// figures are compared with.
type Goldens struct {
	Driver driver.Driver
	Port   int
	Rel    float64
}

// Spec is a one-second spec of test and size against 127.0.0.1:g.Port, the
// spec the goldens were parsed with.
func (g Goldens) Spec(test string, size int) driver.Spec {
	return driver.Spec{Server: "127.0.0.1", Port: g.Port, Test: test, MsgSize: size, Duration: time.Second}
}

// Parse parses testdata/file as the output of Spec(test, size), failing t if
// it does not parse.
func (g Goldens) Parse(t testing.TB, test string, size int, file string) *result.Result {
	t.Helper()
	return g.ParseOut(t, g.Spec(test, size), Golden(t, file))
}

// ParseOut parses out as the output of spec, failing t if it does not parse.
func (g Goldens) ParseOut(t testing.TB, spec driver.Spec, out []byte) *result.Result {
	t.Helper()
	r, err := g.Driver.Parse(spec, out)
	if err != nil {
		t.Fatalf("%s %s %dB: %v", g.Driver.Name(), spec.Test, spec.MsgSize, err)
	}
	return r
}

// Near is the package-level Near with g's tolerance.
func (g Goldens) Near(t testing.TB, what string, got *float64, want float64) {
	t.Helper()
	Near(t, what, got, want, g.Rel)
}

// ParseError is a golden file that must fail to parse as Test at Size, with
// an error that contains Want.
type ParseError struct {
	File, Test string
	Size       int
	Want       string
}

// ParseErrors fails t for each case that parses, or fails with another error.
func (g Goldens) ParseErrors(t testing.TB, cases []ParseError) {
	t.Helper()
	for _, c := range cases {
		_, err := g.Driver.Parse(g.Spec(c.Test, c.Size), Golden(t, c.File))
		if err == nil || !strings.Contains(err.Error(), c.Want) {
			t.Errorf("%s as %s %dB: err = %v, want it to contain %q", c.File, c.Test, c.Size, err, c.Want)
		}
	}
}

// Unparsable fails t for each of outs that parses as the output of spec.
func (g Goldens) Unparsable(t testing.TB, spec driver.Spec, outs ...string) {
	t.Helper()
	for _, out := range outs {
		if _, err := g.Driver.Parse(spec, []byte(out)); err == nil {
			t.Errorf("output %q parsed", out)
		}
	}
}

// SizeLimits fails t for each size ClientCommand accepts for test when
// ok[size] is false, or refuses when it is true. A tool's own size limits are
// refused when the command is built, so an experiment with them fails its
// check rather than every run.
func (g Goldens) SizeLimits(t testing.TB, test string, ok map[int]bool) {
	t.Helper()
	for size, want := range ok {
		if _, err := g.Driver.ClientCommand(g.Spec(test, size)); (err == nil) != want {
			t.Errorf("%s %d: %v, want ok=%v", test, size, err, want)
		}
	}
}
