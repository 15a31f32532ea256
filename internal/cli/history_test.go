package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/report"
)

func TestHistoryCommand(t *testing.T) {
	db := historyDB(t)
	out, err := runCLI(t, "history", "nightly", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "12 stored runs") || !strings.Contains(out, "kernel 6.1.0 → 6.18.4") || !strings.Contains(out, "│") ||
		!strings.Contains(out, "(slower") {
		t.Errorf("history:\n%s", out)
	}
	out, err = runCLI(t, "history", "nightly", "--db", db, "--format", "json", "--last", "9")
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
	if _, err := runCLI(t, "history", "nightly", "--db", db, "--format", "html", "-o", page); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{
		{"history", "nightly", "--format", "csv"},
		{"history", "nightly", "--last", "-1"},
		{"history"},
		{"history", "nightlyy"},
	} {
		_, err := runCLI(t, append(bad, "--db", db)...)
		if ExitCode(err) != 2 || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: want a one-line usage error, got %v", bad, err)
		}
		if len(bad) > 1 && bad[1] == "nightlyy" && !strings.Contains(err.Error(), "default, nightly") {
			t.Errorf("unknown experiment error does not list the stored ones: %v", err)
		}
	}
	if _, err := runCLI(t, "history", "nightly", "--db", filepath.Join(t.TempDir(), "none.db")); ExitCode(err) != 2 {
		t.Errorf("missing database: %v", err)
	}
}
