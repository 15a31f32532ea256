package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// `disrupt` refuses what it cannot run with one line and exit 2, before
// anything is built.
func TestDisruptUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nevents: [{kind: kube-proxy-resync}]\narms: [{name: a, topology: veth}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ovn := filepath.Join(dir, "ovn.yaml")
	if err := os.WriteFile(ovn, []byte("name: x\nevents: [{kind: ovn-sb-restart}]\narms: [{name: a, topology: veth}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantUsageErrors(t, []usageCase{
		{[]string{"disrupt", "run"}, "needs one disruption experiment"},
		{[]string{"disrupt", "run", "no-such-experiment"}, "blackhole-resolution"},
		{[]string{"disrupt", "run", bad}, "needs knobs {proxy"},
		{[]string{"disrupt", "run", ovn}, "needs preset ovn-overlay or ovn-underlay"},
		{[]string{"disrupt", "report", filepath.Join(dir, "none.json")}, "disrupt report"},
		{[]string{"disrupt", "report", bad, "--format", "pdf"}, "--format"},
		{[]string{"disrupt", "report", "last", "--db", filepath.Join(dir, "none.db")}, "no results database"},
	})
	if os.Geteuid() == 0 { // past its root check: a --db it cannot use stops it before any lab
		wantUsageErrors(t, []usageCase{
			{[]string{"disrupt", "run", "blackhole-resolution", "--db", "postgres://cnb:secret@host:notaport/x"}, "not a usable PostgreSQL URL"},
		})
	}
}
