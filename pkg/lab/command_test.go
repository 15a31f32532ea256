package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input is ErrInvalid and found before anything is built (no state file).
func TestUpCommandRefusesBadInput(t *testing.T) {
	privateState(t)
	for _, c := range []UpCommand{
		{Topology: "flannel"},
		{Topology: "veth", Sets: []string{"mtu"}},
		{Topology: "veth", Sets: []string{"mtu=abc"}},
		{Topology: "vxlan", Sets: []string{"turbo=on"}},
		{Topology: filepath.Join(t.TempDir(), "missing.yaml")},
	} {
		var out bytes.Buffer
		if err := c.Run(context.Background(), &out, io.Discard); !errors.Is(err, ErrInvalid) || out.Len() > 0 {
			t.Errorf("%+v: got %v, printed %q; want ErrInvalid and nothing printed", c, err, out.String())
		}
	}
	if es, _ := os.ReadDir(StateDir); len(es) != 0 {
		t.Errorf("state left: %v", es)
	}
}

// Up's refusals of its input match ErrInvalid (the CLI's exit 2) and keep
// their message; they are found before anything is created.
func TestUpInvalidInput(t *testing.T) {
	// Resolve checks the spec; Up takes only what Resolve made.
	if _, err := Resolve(TopoHost, "", map[string]string{"services": "10"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "knob services") {
		t.Errorf("invalid spec: %v", err)
	}
	s := &Spec{Topology: TopoHost, PodsPerNode: 2, Services: 10} // the host topology has no path to a service
	if _, err := Up(context.Background(), s, UpOptions{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "lab.Resolve") {
		t.Errorf("spec not from Resolve: %v", err)
	}
	v, _ := Preset(TopoVeth)
	if os.Geteuid() != 0 {
		return // the name is checked after the root check
	}
	if _, err := Up(context.Background(), v, UpOptions{Name: "bad name/x"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "lab name") {
		t.Errorf("bad name: %v", err)
	}
}

// Like CNI DEL, removing a lab that is not there succeeds, with a note.
func TestDownNamedMissingLab(t *testing.T) {
	privateState(t)
	var out, log bytes.Buffer
	if err := DownNamed(context.Background(), "gone", &out, &log); err != nil || out.Len() > 0 ||
		!strings.Contains(log.String(), "lab gone: not found, nothing to remove") {
		t.Errorf("got %v, out %q, log %q", err, out.String(), log.String())
	}
}

func TestExecInUnknownLab(t *testing.T) {
	privateState(t)
	err := ExecIn("gone", "client", []string{"true"})
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrNoLab) {
		t.Errorf("got %v, want ErrInvalid wrapping ErrNoLab", err)
	}
}

func TestShowUnknownLab(t *testing.T) {
	privateState(t)
	if _, err := Show("gone"); !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrNoLab) {
		t.Errorf("got %v, want ErrInvalid wrapping ErrNoLab", err)
	}
}

// A state file that cannot be read does not hide the labs that can: they
// are listed, and the error names the broken file.
func TestListPrintCorruptState(t *testing.T) {
	privateState(t)
	os.MkdirAll(StateDir, 0o755)
	good, _ := json.Marshal(&Lab{Name: "good", ID: "abc123", Preset: "veth"})
	os.WriteFile(filepath.Join(StateDir, "good.json"), good, 0o644)
	os.WriteFile(filepath.Join(StateDir, "bad.json"), []byte("{"), 0o644)
	var out bytes.Buffer
	err := ListPrint(&out)
	if err == nil || !strings.Contains(err.Error(), "lab bad: corrupt state file") ||
		!strings.HasPrefix(out.String(), "NAME") || !strings.Contains(out.String(), "\ngood ") || !strings.Contains(out.String(), " abc123 ") {
		t.Errorf("got %v, out:\n%s", err, out.String())
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
