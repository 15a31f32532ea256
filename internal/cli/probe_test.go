package cli

import (
	"encoding/json"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/datapath"
)

func TestProbeAttachedFlagErrors(t *testing.T) {
	wantUsageErrors(t, []usageCase{
		{[]string{"probe", "attached", "--netns", "cnb-none-such"}, "--netns cnb-none-such: no such network namespace"},
		{[]string{"probe", "attached", "--cgroup", "/nonexistent/cg"}, "--cgroup /nonexistent/cg: not a directory"},
		{[]string{"probe", "attached", "extra"}, "unknown command"},
	})
}

// TestPrivProbeAttachedEmpty: a fresh namespace has nothing attached, and
// the JSON says so with an empty list, not null.
func TestPrivProbeAttachedEmpty(t *testing.T) {
	ns := testns.NewNetns(t, "pa")
	out, err := runCLI(t, "probe", "attached", "--netns", ns, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ps []datapath.Program
	if err := json.Unmarshal([]byte(out), &ps); err != nil || ps == nil || len(ps) != 0 {
		t.Errorf("got %q (%v)", out, err)
	}
}
