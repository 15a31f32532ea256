package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// historyDB stores 12 runs of experiment "nightly" (vxlan 20% slower from
// the 7th on, with a kernel change) plus an incomplete one and a run of
// another experiment.
func historyDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	add := func(name string, started time.Time, kernel string, vxlanUs float64, complete bool) {
		run := &store.Run{Name: name, Kind: store.KindLab, Baseline: "host", Started: started,
			Host: result.Fingerprint{Hostname: "ci", Kernel: kernel},
			Arms: []store.Arm{{Name: "host", Topology: "host", Engine: "builtin"}, {Name: "vxlan", Topology: "vxlan", Engine: "builtin"}}}
		id, err := db.CreateRun(run)
		if err != nil {
			t.Fatal(err)
		}
		for rep := 0; rep < 5; rep++ {
			for _, arm := range []string{"host", "vxlan"} {
				us := 10 + 0.1*float64(rep) + 0.05*float64(started.Day()%3)
				if arm == "vxlan" {
					us += vxlanUs
				}
				r := result.New(result.Tool{Name: "cnibench"}, result.TCPLat, 1)
				r.Latency = &result.Latency{OneWayNs: result.Dist{Count: 1000, Mean: result.F(us * 1000)}}
				if err := db.AddSample(&store.Sample{RunID: id, Seq: rep*2 + len(arm), Arm: arm, Engine: "builtin", Test: result.TCPLat, MsgSize: 1, Repeat: rep, Result: r}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := db.FinishRun(id, complete, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	for i := 0; i < 12; i++ {
		s := t0.AddDate(0, 0, i)
		kernel, vx := "6.1.0", 3.0
		if i >= 6 {
			kernel, vx = "6.18.4", 5.0
		}
		add("nightly-"+s.Format("20060102T150405Z"), s, kernel, vx, true)
	}
	add("nightly-"+t0.AddDate(0, 0, 20).Format("20060102T150405Z"), t0.AddDate(0, 0, 20), "6.18.4", 9, false)
	add("default-"+t0.Format("20060102T150405Z"), t0, "6.1.0", 3, true)
	return path
}

func TestHistoryCommand(t *testing.T) {
	db := historyDB(t)
	out, err := run(t, "history", "nightly", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "12 stored runs") || !strings.Contains(out, "kernel 6.1.0 → 6.18.4") || !strings.Contains(out, "│") ||
		!strings.Contains(out, "slower by") {
		t.Errorf("history:\n%s", out)
	}
	out, err = run(t, "history", "nightly", "--db", db, "--format", "json", "--last", "9")
	if err != nil {
		t.Fatal(err)
	}
	var h report.History
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Runs) != 9 {
		t.Errorf("--last 9: %d runs", len(h.Runs))
	}
	for _, s := range h.Series {
		if s.Arm == "vxlan" && (len(s.ChangePoints) != 1 || s.ChangePoints[0].Run != 3) {
			t.Errorf("vxlan in the last 9 runs: %+v", s.ChangePoints)
		}
		if s.Arm == "host" && len(s.ChangePoints) != 0 {
			t.Errorf("host: %+v", s.ChangePoints)
		}
	}
	page := filepath.Join(t.TempDir(), "h.html")
	if _, err := run(t, "history", "nightly", "--db", db, "--format", "html", "-o", page); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{
		{"history", "nightly", "--format", "csv"},
		{"history", "nightly", "--last", "-1"},
		{"history"},
		{"history", "nightlyy"},
	} {
		_, err := run(t, append(bad, "--db", db)...)
		if ExitCode(err) != 2 || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: want a one-line usage error, got %v", bad, err)
		}
		if len(bad) > 1 && bad[1] == "nightlyy" && !strings.Contains(err.Error(), "default, nightly") {
			t.Errorf("unknown experiment error does not list the stored ones: %v", err)
		}
	}
	if _, err := run(t, "history", "nightly", "--db", filepath.Join(t.TempDir(), "none.db")); ExitCode(err) != 2 {
		t.Errorf("missing database: %v", err)
	}
}
