package experiment

import (
	"testing"

	"github.com/cnibench/cnibench/internal/fuzzseed"
)

// FuzzParse: any experiment text parses strictly or is refused with an
// error; one that parses can be planned, and its plan has one step per
// arm × test × that test's size × repeat.
func FuzzParse(f *testing.F) {
	fuzzseed.AddFiles(f, "../../experiments/*.yaml")
	f.Add([]byte("arms: [{name: a, topology: veth}]\ntests: [tcp_lat]\nsizes: [1]\nrepeats: 1\n"))
	f.Add([]byte("arms: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		e, err := Parse(in, "fuzz.yaml")
		if err != nil {
			return
		}
		want := 0
		for i := range e.Arms {
			for _, test := range e.ArmTests(&e.Arms[i]) {
				want += len(e.Sizes(test)) * e.Repeats
			}
		}
		if got := len(e.Plan()); got != want {
			t.Fatalf("plan has %d steps, want %d", got, want)
		}
	})
}
