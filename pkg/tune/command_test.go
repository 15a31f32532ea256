package tune

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestApplyCommandOptions(t *testing.T) {
	var asked []string
	nss := func(scope string) ([]string, error) {
		asked = append(asked, scope)
		if scope == "lab:nope" {
			return nil, errors.New("no lab nope")
		}
		if scope == "lab:one" {
			return []string{"cnb-x-a", "cnb-x-b"}, nil
		}
		return nil, nil
	}
	for _, tc := range []struct {
		c       ApplyCommand
		invalid bool
		want    string
	}{
		{ApplyCommand{}, true, "apply needs --profile"},
		{ApplyCommand{Selection: Selection{Profile: "fast"}}, true, `"fast"`},
		{ApplyCommand{Selection: Selection{Profile: "latency", Only: "no.such.knob"}}, true, "no.such.knob"},
		{ApplyCommand{Selection: Selection{Profile: "latency", Scope: "host"}}, true, "add --yes, or --dry-run"},
		{ApplyCommand{Selection: Selection{Profile: "latency", Scope: "lab:nope"}}, false, "no lab nope"},
	} {
		tc.c.Namespaces = nss
		_, err := tc.c.Options()
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrInvalid) != tc.invalid {
			t.Errorf("%+v: got %v, want an error containing %q (ErrInvalid: %v)", tc.c, err, tc.want, tc.invalid)
		}
	}
	o, err := ApplyCommand{Selection: Selection{Profile: "throughput", Scope: "lab:one", Namespaces: nss}, JournalDir: "/j"}.Options()
	if err != nil {
		if os.Geteuid() != 0 && errors.Is(err, ErrInvalid) && strings.Contains(err.Error(), "needs root") {
			t.Skip("not root: apply without --dry-run is refused, as it should be")
		}
		t.Fatal(err)
	}
	if o.Profile != Throughput || len(o.Netns) != 2 || o.ScopeLabel != "lab:one" || o.JournalDir != "/j" || o.DryRun || len(o.Knobs) == 0 {
		t.Errorf("options %+v", o)
	}
	o, err = ApplyCommand{Selection: Selection{Profile: "latency", Namespaces: nss}, DryRun: true}.Options()
	if err != nil || o.ScopeLabel != "host" || o.Netns != nil || !o.DryRun {
		t.Errorf("dry run on the host: %+v, %v", o, err)
	}
	if !strings.Contains(strings.Join(asked, " "), "lab:one") {
		t.Errorf("scope not resolved through Namespaces: %v", asked)
	}
}

// Audit with both profiles reads the fixture tree, not this host: a
// table with a profile column, or with JSON one finding per profile.
func TestAuditCommandFixture(t *testing.T) {
	var b bytes.Buffer
	c := AuditCommand{Selection: Selection{Only: "net.core.busy_poll"}, Root: "testdata/vm"}
	if err := c.Run(&b); err != nil || !strings.HasPrefix(b.String(), "PROFILE") || strings.Count(b.String(), "net.core.busy_poll") != 2 {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
	b.Reset()
	c.JSON = true
	var fs []Finding
	if err := c.Run(&b); err != nil || json.Unmarshal(b.Bytes(), &fs) != nil || len(fs) != 2 || fs[0].Profile == fs[1].Profile {
		t.Fatalf("json: %v, %d findings\n%s", err, len(fs), b.String())
	}
	c.Profile = "slow"
	if err := c.Run(&b); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad profile: %v", err)
	}
}

// A dry run prints its plan and changes nothing, so it writes no journal.
func TestApplyPrintDryRun(t *testing.T) {
	dir := t.TempDir()
	o := ApplyOptions{Env: EnvAt("testdata/vm"), Profile: Latency, DryRun: true, JournalDir: dir, ScopeLabel: "host"}
	o.Knobs, _ = Select([]string{"net.core.busy_poll"})
	var printed *ApplyReport
	if err := applyPrint(o, func(r *ApplyReport) error { printed = r; return nil }); err != nil {
		t.Fatal(err)
	}
	if printed == nil || printed.Journal != "" {
		t.Fatalf("report %+v", printed)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("a dry run wrote %v", es)
	}
	stop := errors.New("stdout closed")
	if err := applyPrint(o, func(*ApplyReport) error { return stop }); err != stop {
		t.Errorf("print error: got %v", err)
	}
}

// Run prints the plan as a table, or with JSON as the report; a dry run
// on the host only reads it.
func TestApplyCommandRunTableOrJSON(t *testing.T) {
	var b bytes.Buffer
	c := ApplyCommand{Selection: Selection{Profile: "latency", Only: "net.core.busy_poll"}, DryRun: true, JournalDir: t.TempDir()}
	if err := c.Run(&b); err != nil || !strings.HasPrefix(b.String(), "KNOB ") {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
	b.Reset()
	c.JSON = true
	var rep ApplyReport
	if err := c.Run(&b); err != nil || json.Unmarshal(b.Bytes(), &rep) != nil || rep.Journal != "" || rep.Changes == nil {
		t.Fatalf("json: %v, %+v\n%s", err, rep, b.String())
	}
}

func TestRollbackPrintNothingToDo(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	if err := RollbackPrint(DefaultEnv(), dir, "", &b); err != nil || !strings.Contains(b.String(), "no applied journals in "+dir) {
		t.Errorf("empty dir: %v, %q", err, b.String())
	}
	err := RollbackPrint(DefaultEnv(), dir, filepath.Join(dir, "missing.jsonl"), &b)
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "--journal ") {
		t.Errorf("missing journal: %v", err)
	}
}
