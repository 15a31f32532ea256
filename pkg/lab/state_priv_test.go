package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
)

// TestPrivDownPreviousVersionState: a lab whose state file the previous
// version wrote goes down with this one. The fixture's vxlan lab
// (conntrack, notrack, the fast path, offloads, rmem_max) is built under
// its name with a fresh id; its state file is then replaced by the
// fixture's, with the id and the journal's path rewritten to this lab's —
// the file the old binary writes for this lab — and `lab down` through
// that file removes every object and rolls the journal back.
func TestPrivDownPreviousVersionState(t *testing.T) {
	testns.HostWide(t) // rmem_max is host-wide on most kernels
	privateState(t)
	raw, err := os.ReadFile(filepath.Join("testdata", "state-157b073", "old-vxlan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var old Lab
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	id := pinID(t)
	l, err := Up(context.Background(), presetWith(t, old.Preset, old.Knobs), UpOptions{Name: old.Name})
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	downOnCleanup(t, l)
	if l.Journal == "" {
		t.Fatal("the lab journaled nothing: the test proves nothing about rollback")
	}
	text := strings.ReplaceAll(string(raw), old.ID, id)
	text = strings.ReplaceAll(text, strconv.Quote(strings.ReplaceAll(old.Journal, old.ID, id)), strconv.Quote(l.Journal))
	if err := os.WriteFile(statePath(l.Name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Get(l.Name); err != nil || got.Journal != l.Journal || got.ID != id {
		t.Fatalf("the rewritten old state: %v %+v", err, got)
	}
	var out, log bytes.Buffer
	if err := DownNamed(context.Background(), l.Name, &out, &log); err != nil {
		t.Fatalf("down through the old state file: %v", err)
	}
	assertClean(t, id)
	if _, err := os.Stat(l.Journal); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journal %s left: %v", l.Journal, err)
	}
	if _, err := Get(l.Name); !errors.Is(err, ErrNoLab) {
		t.Errorf("state file left: %v", err)
	}
}
