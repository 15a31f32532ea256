package iperf3

import (
	"testing"

	"github.com/cnibench/cnibench/internal/fuzzseed"
)

// FuzzDecode: iperf3 -J output of any shape decodes or is refused without a
// panic, however deeply server_output_json nests.
func FuzzDecode(f *testing.F) {
	fuzzseed.AddFiles(f, "testdata/*.json")
	f.Add([]byte(`{"server_output_json":{"server_output_json":{"end":{}}}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		_, _ = Decode(in)
	})
}
