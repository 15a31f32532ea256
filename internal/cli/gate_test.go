package cli

import (
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/report"
)

// compare --fail-on: run "first" has vxlan 3 µs (~29%) slower than run
// "second"; host is the same in both.
func TestCompareGate(t *testing.T) {
	db := seedDB(t)
	junit := filepath.Join(t.TempDir(), "gate.xml")

	_, err := runCLI(t, "compare", "second", "first", "--db", db, "--fail-on", "slower>5%", "--junit", junit)
	var ge *report.GateError
	if !errors.As(err, &ge) || ExitCode(err) != 1 || len(ge.Failed) == 0 || !strings.Contains(err.Error(), "vxlan tcp_lat 1B") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a 29%% slowdown passed the gate or failed wrongly: %v (exit %d)", err, ExitCode(err))
	}
	for _, r := range ge.Failed {
		if r.Arm != "vxlan" {
			t.Errorf("an unchanged arm failed the gate: %+v", r)
		}
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(b, &suite); err != nil {
		t.Fatalf("JUnit XML: %v\n%s", err, b)
	}
	if suite.Failures != len(ge.Failed) || suite.Tests != len(suite.Cases) || suite.Tests < 2 {
		t.Errorf("JUnit: %d tests, %d failures (gate failed %d)\n%s", suite.Tests, suite.Failures, len(ge.Failed), b)
	}

	// The same slowdown under a looser rule, the improvement, and a run
	// against itself all pass.
	for _, args := range [][]string{
		{"compare", "second", "first", "--fail-on", "slower>50%"},
		{"compare", "first", "second", "--fail-on", "worse>5%"},
		{"compare", "first", "first", "--fail-on", "slower>0%"},
		{"compare", "second", "first", "--fail-on", "slower>5%,tcp_lat:slower>40%"},
		{"compare", "second", "first", "--fail-on", "udp_lat:slower>1%"},
	} {
		if _, err := runCLI(t, append(args, "--db", db)...); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	// The most specific rule decides; a rule for another test does not
	// loosen tcp_lat.
	if _, err := runCLI(t, "compare", "second", "first", "--db", db, "--fail-on", "slower>40%,one_way_mean_us:slower>5%"); ExitCode(err) != 1 {
		t.Errorf("metric rule 5%% under a general 40%%: %v", err)
	}
	if _, err := runCLI(t, "compare", "second", "first", "--db", db, "--fail-on", "slower>5%,udp_lat:slower>40%"); ExitCode(err) != 1 {
		t.Errorf("a udp_lat rule loosened tcp_lat: %v", err)
	}
	for _, bad := range []string{"faster>5%", "slower>5", "slower>-1%", "slower>abc%", "tcp_lta:slower>5%", "slower>5%,slower>3%", "slower>5%;worse>3%"} {
		if _, err := runCLI(t, "compare", "first", "second", "--db", db, "--fail-on", bad); ExitCode(err) != 2 {
			t.Errorf("--fail-on %q: want a usage error, got %v", bad, err)
		}
	}
	if _, err := runCLI(t, "compare", "first", "second", "--db", db, "--junit", junit); ExitCode(err) != 2 {
		t.Errorf("--junit without --fail-on: %v", err)
	}
}

// REF@ARM: two arms of one run gated against each other. In run "first"
// vxlan is 3 µs (~29%) slower than host; in "second" the two are equal.
func TestCompareGateArms(t *testing.T) {
	db := seedDB(t)
	out, err := runCLI(t, "compare", "first@host", "first@vxlan", "--db", db, "--fail-on", "slower>5%")
	var ge *report.GateError
	if !errors.As(err, &ge) || ExitCode(err) != 1 || len(ge.Failed) != 1 || ge.Failed[0].Arm != "host→vxlan" {
		t.Fatalf("arm vs arm in one run: want one failed cell host→vxlan, got %v (exit %d)\n%s", err, ExitCode(err), out)
	}
	if !strings.Contains(out, "host→vxlan") {
		t.Errorf("the table does not name the pair:\n%s", out)
	}
	// The same pair where they are equal passes; an arm against itself
	// in another run passes; the reverse direction passes (faster).
	for _, args := range [][]string{
		{"second@host", "second@vxlan"}, {"first@host", "second@host"}, {"first@vxlan", "first@host"},
	} {
		if _, err := runCLI(t, "compare", args[0], args[1], "--db", db, "--fail-on", "slower>5%"); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	// A whole run against one arm compares that arm only.
	if out, err := runCLI(t, "compare", "second", "first@vxlan", "--db", db, "--fail-on", "slower>5%"); ExitCode(err) != 1 || strings.Contains(out, "│ host ") {
		t.Errorf("run vs one arm: %v\n%s", err, out)
	}
	_, err = runCLI(t, "compare", "first@nope", "first@host", "--db", db)
	if ExitCode(err) != 2 || !strings.Contains(err.Error(), `no arm "nope"`) || !strings.Contains(err.Error(), "host, vxlan") {
		t.Errorf("unknown arm: want a usage error listing the arms, got %v", err)
	}
}
