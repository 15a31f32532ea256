package lab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// isolateState points StateDir at a fresh directory for one test.
func isolateState(t *testing.T) {
	old := StateDir
	StateDir = filepath.Join(t.TempDir(), "labs")
	t.Cleanup(func() { StateDir = old })
}

// Bad input is ErrInvalid and found before anything is built (no state file).
func TestUpCommandRefusesBadInput(t *testing.T) {
	isolateState(t)
	for _, c := range []UpCommand{
		{Topology: "flannel"},
		{Topology: "veth", Sets: []string{"mtu"}},
		{Topology: "veth", Sets: []string{"mtu=abc"}},
		{Topology: "vxlan", Sets: []string{"turbo=on"}},
		{Topology: filepath.Join(t.TempDir(), "missing.yaml")},
	} {
		var out bytes.Buffer
		if err := c.Run(context.Background(), &out); !errors.Is(err, ErrInvalid) || out.Len() > 0 {
			t.Errorf("%+v: got %v, printed %q; want ErrInvalid and nothing printed", c, err, out.String())
		}
	}
	if es, _ := os.ReadDir(StateDir); len(es) != 0 {
		t.Errorf("state left: %v", es)
	}
}

// Like CNI DEL, removing a lab that is not there succeeds, with a note.
func TestDownNamedMissingLab(t *testing.T) {
	isolateState(t)
	var out, log bytes.Buffer
	if err := DownNamed(context.Background(), "gone", &out, &log); err != nil || out.Len() > 0 ||
		!strings.Contains(log.String(), "lab gone: not found, nothing to remove") {
		t.Errorf("got %v, out %q, log %q", err, out.String(), log.String())
	}
}

func TestExecInUnknownLab(t *testing.T) {
	isolateState(t)
	err := ExecIn("gone", "client", []string{"true"})
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrNoLab) {
		t.Errorf("got %v, want ErrInvalid wrapping ErrNoLab", err)
	}
}

// A bad run id is refused, and the count line is printed all the same.
func TestCleanPrintBadID(t *testing.T) {
	var out bytes.Buffer
	err := CleanPrint(context.Background(), "NOT-AN-ID", &out)
	if err == nil || !strings.Contains(out.String(), "clean: 0 objects removed") {
		t.Errorf("got %v, %q", err, out.String())
	}
}
