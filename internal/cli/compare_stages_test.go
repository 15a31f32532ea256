package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// profiledRun stores a run of one arm (vxlan) × 5 repeats of tcp_lat with a
// profile per sample: 1000 transactions and 1 ms per cpu-clock sample, so a
// sample is 1 CPU-µs per transaction; encap samples are the given count.
func profiledRun(t *testing.T, db *store.DB, name string, encap int) {
	t.Helper()
	id, err := db.CreateRun(&store.Run{Name: name, Kind: "lab", Experiment: "x", Started: time.Now(),
		Arms: []store.Arm{{Name: "vxlan", Topology: "vxlan", Engine: "builtin"}}})
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 5; r++ {
		res := result.New(result.Tool{Name: "cnibench"}, result.TCPLat, 1)
		res.Latency = &result.Latency{OneWayNs: result.Dist{Count: 1000, Mean: result.F(20000 + float64(encap+r)*100)}}
		res.Transactions = &result.Transactions{Count: 1000, PerSec: 1000}
		if err := db.AddSample(&store.Sample{RunID: id, Seq: r, Arm: "vxlan", Engine: "builtin", Test: result.TCPLat, MsgSize: 1, Repeat: r, Result: res}); err != nil {
			t.Fatal(err)
		}
		folded := fmt.Sprintf("cnibench;[user];do_syscall_64;tcp_sendmsg %d\ncnibench;[user];do_syscall_64;tcp_sendmsg;ip_output;vxlan_xmit %d\n", 100+r, encap+r)
		n := uint64(100 + r + encap + r)
		if err := db.AddProfile(&store.Profile{RunID: id, Seq: r, Event: "cpu-clock", Frequency: 1000, CPUs: 2, WindowNs: 1e9,
			Samples: n, PeriodSum: n * 1e6, Folded: folded}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishRun(id, true, "complete"); err != nil {
		t.Fatal(err)
	}
}

// compare of two profiled runs explains each arm's change stage by stage
// under its table; JSON output stays one document.
func TestCompareStages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	profiledRun(t, db, "before", 10)
	profiledRun(t, db, "after", 40)
	db.Close()
	out, err := runCLI(t, "compare", "before", "after", "--db", path)
	if err != nil {
		t.Fatalf("compare: %v\n%s", err, out)
	}
	for _, want := range []string{"CPU by datapath stage, each arm of B against itself in A", "A = before, B = after",
		"B/vxlan costs 30 CPU-µs per transaction more than A/vxlan", "encap +30"} {
		// Prose is wrapped at 100 columns: look at it unwrapped.
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("compare output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "compare", "before", "after", "--db", path, "--format", "json")
	if err != nil || strings.Contains(out, "CPU by datapath stage") {
		t.Errorf("json compare: %v\n%s", err, out)
	}
}
