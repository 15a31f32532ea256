package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
)

// An experiment that cannot run is refused before anything is stored or
// built: one line, exit 2, no database, no namespace.
func TestRunRefusesBadExperiments(t *testing.T) {
	bin := testns.Binary(t)
	dir := t.TempDir()
	// A lab writes its state file before it creates its first object, so an
	// empty private state dir shows nothing was built; counting the host's
	// namespaces would also count other tests' running beside this one.
	state := t.TempDir()
	t.Setenv("CNIBENCH_STATE_DIR", state)
	for _, tc := range []struct{ name, body, want string }{
		{"preset typo", "name: x\ntests: [tcp_lat]\narms: [{name: a, topology: vxlann}]\n", `unknown preset "vxlann"`},
		{"knob typo", "name: x\ntests: [tcp_lat]\narms: [{name: a, topology: vxlan, knobs: {conntrak: \"on\"}}]\n", `unknown knob "conntrak"`},
		{"32 MiB tcp message", "name: x\ntests: [tcp_bw]\nmsg_sizes: [32M]\narms: [{name: a, topology: veth}]\n", "at most 16M"},
		{"bad knob value", "name: x\ntests: [tcp_lat]\narms: [{name: a, topology: veth, knobs: {mtu: abc}}]\n", `knob mtu`},
		{"unknown engine", "name: x\ntests: [tcp_lat]\narms: [{name: a, topology: veth, engine: netperf}]\n", `unknown engine "netperf"`},
		{"engine without the test", "name: x\ntests: [tcp_crr]\narms: [{name: a, topology: veth, engine: qperf}]\n", "tcp_crr"},
		{"size below sockperf's minimum", "name: x\ntests: [tcp_lat]\nmsg_sizes: [1]\narms: [{name: a, topology: veth, engine: sockperf}]\n", "sockperf"},
		{"udp datagram too large", "name: x\ntests: [udp_lat]\nmsg_sizes: [64K]\narms: [{name: a, topology: veth}]\n", "65507"},
		{"malformed yaml", "name: x\ntests: [tcp_lat\n", "x.yaml"},
		{"unknown wake-up policy", "name: x\ntests: [tcp_lat]\nwakeup: nap\narms: [{name: a, topology: veth}]\n", `wake-up policy "nap"`},
		{"CPU that does not exist", "name: x\ntests: [tcp_lat]\narms: [{name: a, topology: veth, cpus: \"client=4095\"}]\n", "CPU 4095 does not exist"},
		{"precision out of range", "name: x\ntests: [tcp_lat]\nprecision: 60%\narms: [{name: a, topology: veth}]\n", "precision"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := filepath.Join(dir, "x.yaml")
			if err := os.WriteFile(exp, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			wantRunRefused(t, bin, filepath.Join(dir, tc.name+".db"), tc.want, exp)
			if ents, err := os.ReadDir(state); err != nil || len(ents) > 0 {
				t.Errorf("a refused experiment left lab state: %v %v", ents, err)
			}
		})
	}
	for _, c := range []usageCase{
		{[]string{"default", "--arms", "nosuch"}, "arms: host, veth"},
		{[]string{"default", "--wakeup", "poll"}, ""},
		{[]string{"default", "--cpus", "server=4095"}, ""},
		{[]string{"default", "--precision", "0%"}, ""},
		// The profile flags are checked before the experiment is even
		// loaded, so a broken check fails on the missing file instead.
		{[]string{filepath.Join(dir, "none.yaml"), "--profile", "--profile-rate", "0"}, "--profile"},
		{[]string{filepath.Join(dir, "none.yaml"), "--profile", "--profile-event", "instructions"}, "--profile"},
	} {
		wantRunRefused(t, bin, filepath.Join(dir, "z.db"), c.want, c.args...)
	}
}

// A run whose steps fail (a lab this kernel cannot build) stores what it
// measured, prints its report, and exits 1 saying how many steps failed.
func TestPrivRunWithFailedStepsExits1(t *testing.T) {
	// geneve where the kernel lacks it; a kernel with it gets a preset that
	// fails the same way for every kernel: none exists, so use geneve and
	// skip where it builds.
	bin, dir, exp := privExperiment(t, "name: x\ntests: [tcp_lat]\nduration: 200ms\nwarmup: 0s\nrepeats: 1\narms:\n  - {name: veth, topology: veth}\n  - {name: geneve, topology: geneve}\n")
	out, code := runBin(t, bin, "run", exp, "--db", filepath.Join(dir, "r.db"))
	if code == 0 && !strings.Contains(out, "not supported") {
		t.Skip("this kernel builds geneve; no arm here fails")
	}
	if code != 1 || !strings.Contains(out, "1 of 2 steps failed") || !strings.Contains(out, "stored as run") {
		t.Fatalf("exit %d, want 1 with '1 of 2 steps failed' after storing:\n%s", code, out)
	}
}
