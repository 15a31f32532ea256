package tune

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cnibench/cnibench/internal/fixture"
)

// FuzzReadJournal: a journal torn, duplicated, reordered or garbled by a
// crash or a person is read or refused without a panic. One that reads
// starts with its begin entry, and a torn last line is never an entry:
// appending a partial line to a readable journal reads the same entries.
func FuzzReadJournal(f *testing.F) {
	begin := `{"type":"begin","time":"2026-11-24T10:00:00Z","id":"j1","profile":"latency","scope":"host"}`
	change := `{"type":"change","time":"2026-11-24T10:00:01Z","seq":1,"knob":"net.core.busy_read","knob_scope":"host","target":"/proc/sys/net/core/busy_read","old":"0","new":"50"}`
	f.Add([]byte(begin + "\n" + change + "\n"))
	f.Add([]byte(begin + "\n" + change + "\n" + change + "\n"))
	f.Add([]byte(change + "\n" + begin + "\n"))
	f.Add([]byte(begin + "\n" + change[:40]))
	f.Add([]byte(begin + "\n{\n" + change + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		p := fixture.File(t, "j.jsonl", string(in))
		es, err := ReadJournal(p)
		if err != nil {
			return
		}
		if len(es) == 0 || es[0].Type != "begin" {
			t.Fatalf("journal read without its begin entry: %+v", es)
		}
		// Only a journal whose last line is a whole entry can have been
		// appended to; after a torn line nothing is ever written again. A
		// last line that is JSON but no entry (a garbled time, found by
		// this target) is read as torn, so it is not "whole" either.
		lines := bytes.Split(bytes.TrimRight(in, "\n"), []byte("\n"))
		var last Entry
		if !bytes.HasSuffix(in, []byte("\n")) || json.Unmarshal(lines[len(lines)-1], &last) != nil {
			return
		}
		torn := append(append([]byte(nil), in...), []byte(`{"type":"chan`)...)
		if err := os.WriteFile(p, torn, 0o600); err != nil {
			t.Fatal(err)
		}
		es2, err := ReadJournal(p)
		if err != nil || len(es2) != len(es) {
			t.Fatalf("a torn last line changed the reading: %d entries, then %d (%v)", len(es), len(es2), err)
		}
	})
}

// A journal whose writer was killed before its begin entry reached the disk
// (found by the chaos test: tune apply SIGKILLed right after creating it)
// holds no change: rollback has nothing to undo and must not fail.
func TestRollbackJournalKilledBeforeBegin(t *testing.T) {
	dir := fixture.Tree(t, map[string]string{"a.jsonl": "", "b.jsonl": `{"type":"beg`})
	for _, name := range []string{"a.jsonl", "b.jsonl"} {
		if n, err := Rollback(&Env{ProcRoot: dir}, filepath.Join(dir, name)); err != nil || n != 0 {
			t.Errorf("%s: restored %d, %v", name, n, err)
		}
	}
	if js, n, err := RollbackAll(&Env{ProcRoot: dir}, dir); err != nil || js != 0 || n != 0 {
		t.Errorf("RollbackAll: %d journals, %d restored, %v", js, n, err)
	}
}
