package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/store"
)

func TestWriteRuns(t *testing.T) {
	started := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
	runs := []store.Run{
		{ID: 1, Name: "a", Kind: "lab", Started: started, Finished: started.Add(time.Minute), Complete: true, Arms: []store.Arm{{Name: "host"}, {Name: "veth"}}},
		{ID: 2, Name: "b", Kind: "k8s", Started: started},
	}
	var js bytes.Buffer
	if err := WriteRunsJSON(&js, runs, map[int64]int{1: 6}); err != nil {
		t.Fatal(err)
	}
	var list []RunListing
	if err := json.Unmarshal(js.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Samples != 6 || list[0].Finished == nil || list[1].Finished != nil ||
		len(list[1].Arms) != 0 || list[1].Arms == nil || list[1].Labels == nil {
		t.Errorf("listing %+v", list)
	}
	var tb bytes.Buffer
	if err := WriteRunsTable(&tb, runs, map[int64]int{1: 6}); err != nil {
		t.Fatal(err)
	}
	if out := tb.String(); !strings.Contains(out, "host,veth") || !strings.Contains(out, "running or killed") {
		t.Errorf("table:\n%s", out)
	}
}

// A failed render leaves neither a truncated file nor a temporary one.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.html")
	if err := WriteFile(nil, p, func(w io.Writer) error { _, err := io.WriteString(w, "ok"); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := WriteFile(nil, p, func(w io.Writer) error { io.WriteString(w, "half"); return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "ok" {
		t.Errorf("report %q after a failed render, want the previous one", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("left behind: %v", es)
	}
	var out bytes.Buffer
	if err := WriteFile(&out, "-", func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil || out.String() != "x" {
		t.Errorf("stdout: %q %v", out.String(), err)
	}
}
