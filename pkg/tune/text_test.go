package tune

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteApplyAndJournals(t *testing.T) {
	rep := &ApplyReport{Journal: "/j/1.jsonl",
		Changes: []Change{{Knob: "net.core.busy_poll", Target: "", Old: "0", New: "50"}, {Knob: "x", Netns: "ns1", Target: "eth0", Error: "denied"}},
		Skipped: []Skip{{Knob: "irq.affinity", Reason: "one CPU"}}}
	var b bytes.Buffer
	WriteApply(&b, rep, true)
	out := b.String()
	for _, want := range []string{"would change", "ns1:eth0", "FAILED: denied", "skipped: one CPU", "journal: /j/1.jsonl"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	js := []JournalInfo{{Path: "a", RolledBack: true}, {Path: "b", Unfinished: 1}}
	b.Reset()
	if n := WriteJournals(&b, js, false); n != 1 || !strings.Contains(b.String(), "interrupted") || strings.Contains(b.String(), "rolled back") {
		t.Errorf("journals (%d):\n%s", n, b.String())
	}
}
