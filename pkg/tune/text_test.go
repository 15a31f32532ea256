package tune

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/fixture"
)

// A fixture root answers from its files; knobs that can only ask the live
// kernel say so instead of reading this host.
func TestEnvAt(t *testing.T) {
	if e := EnvAt("/"); e.ProcRoot != "/proc" || e.NIC != nil {
		t.Errorf("EnvAt(/) = %+v", e)
	}
	e := EnvAt("/fx")
	if e.ProcRoot != "/fx/proc" || e.SysRoot != "/fx/sys" || e.OVSDB != "/fx/var/run/openvswitch/db.sock" {
		t.Errorf("EnvAt(/fx) = %+v", e)
	}
	if _, err := e.NIC.Driver("eth0"); !errors.Is(err, ErrLiveOnly) {
		t.Errorf("NIC at a fixture root: %v", err)
	}
	if _, _, err := e.Rules.KubeProxyRules(); !errors.Is(err, ErrLiveOnly) {
		t.Errorf("rules at a fixture root: %v", err)
	}
}

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

// HoldUntil writes the limit, holds it until the context ends and says so;
// a fixture /dev stands in for the kernel's file.
func TestHoldUntil(t *testing.T) {
	root := fixture.Tree(t, map[string]string{"dev/cpu_dma_latency": "\x00\x00\x00\x00"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var b bytes.Buffer
	if err := HoldUntil(ctx, EnvAt(root), 7, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "holding cpu_dma_latency at 7 µs (kernel now reports 7)") || !strings.Contains(b.String(), "released") {
		t.Errorf("%s", b.String())
	}
	if err := HoldUntil(ctx, EnvAt(filepath.Join(root, "none")), 7, &b); err == nil {
		t.Error("held a limit without the file")
	}
}
