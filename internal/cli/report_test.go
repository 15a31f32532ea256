package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/report"
)

func TestRunsCommand(t *testing.T) {
	db := seedDB(t)
	out, err := runCLI(t, "runs", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "first") || !strings.Contains(out, "second") || !strings.Contains(out, "host,vxlan") {
		t.Errorf("runs:\n%s", out)
	}
	out, err = runCLI(t, "runs", "--json", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	var list []report.RunListing
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[1].Name != "second" || list[0].Samples != 10 || !list[0].Complete {
		t.Errorf("runs --json = %+v", list)
	}
	// CNIBENCH_DB is the default of --db.
	t.Setenv("CNIBENCH_DB", db)
	if out, err := runCLI(t, "runs"); err != nil || !strings.Contains(out, "second") {
		t.Errorf("runs with CNIBENCH_DB: %v\n%s", err, out)
	}
}

func TestReportCommand(t *testing.T) {
	db := seedDB(t)
	out, err := runCLI(t, "report", "last", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Run 2 second") || !strings.Contains(out, "tcp_lat (µs)") {
		t.Errorf("report last:\n%s", out)
	}
	file := filepath.Join(t.TempDir(), "r.html")
	if _, err := runCLI(t, "report", "1", "second", "--db", db, "--format", "html", "-o", file); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(file)
	if err != nil || !bytes.Contains(page, []byte("<svg")) || !bytes.Contains(page, []byte("1 first")) {
		t.Errorf("report -o: %v", err)
	}
	out, err = runCLI(t, "report", "first", "--db", db, "--format", "json")
	if err != nil || !strings.Contains(out, `"schema": "cnibench.report/v1"`) {
		t.Errorf("report --format json: %v", err)
	}
}

func TestReportErrors(t *testing.T) {
	db := seedDB(t)
	_, err := runCLI(t, "report", "nosuch", "--db", db)
	if err == nil || ExitCode(err) != 2 || !strings.Contains(err.Error(), `unknown run "nosuch"`) || !strings.Contains(err.Error(), "cnibench runs") {
		t.Errorf("unknown run: %v", err)
	}
	_, err = runCLI(t, "report", "last", "--db", db, "--format", "pdf")
	if err == nil || ExitCode(err) != 2 || !strings.Contains(err.Error(), "table, markdown, json, csv, html") {
		t.Errorf("bad format: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	_, err = runCLI(t, "report", "last", "--db", missing)
	if err == nil || !strings.Contains(err.Error(), "no results database") {
		t.Errorf("missing db: %v", err)
	}
	if _, statErr := os.Stat(missing); statErr == nil {
		t.Error("reading a missing database created it")
	}
	if _, err := runCLI(t, "compare", "first", "--db", db); err == nil || ExitCode(err) != 2 {
		t.Errorf("compare with one run: %v", err)
	}
	if _, err := runCLI(t, "report", "--db", db); err == nil || ExitCode(err) != 2 {
		t.Errorf("report without a run: %v", err)
	}
}

func TestCompareCommand(t *testing.T) {
	db := seedDB(t)
	out, err := runCLI(t, "compare", "first", "second", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	// vxlan went from 13.2 to 10.2 µs median, complete separation of 5+5.
	var vx, host string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "│ vxlan") {
			vx = l
		}
		if strings.Contains(l, "│ host") {
			host = l
		}
	}
	if !strings.Contains(vx, "faster 22.7%") {
		t.Errorf("vxlan row %q", vx)
	}
	// host is the same in both runs: equivalent within the default ±5%,
	// undecided within ±1% (the 90% interval spans about ±3%).
	if !strings.Contains(host, "equivalent ±5%") {
		t.Errorf("host row %q", host)
	}
	out, err = runCLI(t, "compare", "first", "second", "--db", db, "--margin", "1%")
	if err != nil || !strings.Contains(out, "undecided") || !strings.Contains(out, "equivalent ±1%: the 90% interval") ||
		strings.Contains(out, "│ equivalent") {
		t.Errorf("compare --margin 1%%: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "report", "first", "--db", db, "--margin", "-3%"); err == nil || ExitCode(err) != 2 {
		t.Errorf("report --margin -3%%: %v", err)
	}
	out, err = runCLI(t, "compare", "first", "second", "--db", db, "--format", "json")
	if err != nil || !strings.Contains(out, `"schema": "cnibench.compare/v1"`) {
		t.Errorf("compare --format json: %v", err)
	}
	if _, err := runCLI(t, "compare", "first", "second", "--db", db, "--format", "csv"); err == nil || ExitCode(err) != 2 {
		t.Errorf("compare --format csv: %v", err)
	}
}

// Runs from two hosts live in two databases; FILE:REF names them.
func TestRunsFromTwoDatabases(t *testing.T) {
	a, b := seedDB(t), seedDB(t)
	out, err := runCLI(t, "report", a+":first", b+":last", "--db", filepath.Join(t.TempDir(), "unused.db"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "1 first") || !strings.Contains(out, "2 second") {
		t.Errorf("side by side:\n%s", out)
	}
	if _, err := runCLI(t, "compare", a+":first", b+":first"); err != nil {
		t.Errorf("compare across databases: %v", err)
	}
	_, err = runCLI(t, "report", a+":nosuch")
	if err == nil || !strings.Contains(err.Error(), `unknown run "nosuch" in `+a) {
		t.Errorf("unknown run in a named database: %v", err)
	}
}

// --baseline compares every arm with another one of the same run, for this
// rendering only; an arm the run lacks is a usage error naming the arms.
func TestReportBaselineFlag(t *testing.T) {
	db := seedDB(t)
	out, err := runCLI(t, "report", "first", "--db", db, "--baseline", "vxlan")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Each arm against vxlan") || !strings.Contains(out, "faster") {
		t.Errorf("report with --baseline vxlan:\n%s", out)
	}
	if out2, _ := runCLI(t, "report", "first", "--db", db); !strings.Contains(out2, "Each arm against host") {
		t.Errorf("the stored baseline changed:\n%s", out2)
	}
	_, err = runCLI(t, "report", "first", "--db", db, "--baseline", "nope")
	if err == nil || !strings.Contains(err.Error(), `--baseline "nope": run first has no such arm (arms: host, vxlan)`) {
		t.Errorf("--baseline nope: %v", err)
	}
}
