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

func TestProbeMTUFlagErrors(t *testing.T) {
	wantUsageErrors(t, []usageCase{
		{[]string{"probe", "mtu"}, "give --lab NAME (a lab's path) or --server HOST[:PORT]"},
		{[]string{"probe", "mtu", "--lab", "x", "--server", "10.0.0.1"}, "not both or neither"},
		{[]string{"probe", "mtu", "--lab", "x", "--netns", "y"}, "--netns goes with --server"},
		{[]string{"probe", "mtu", "--server", "10.0.0.1", "--to", "node2"}, "--from and --to name a lab's endpoints"},
		{[]string{"probe", "mtu", "--server", "[::1]:7420"}, "IPv6 paths are not probed"},
		{[]string{"probe", "mtu", "--lab", "cnb-none-such"}, `no lab named "cnb-none-such"`},
	})
}
