package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A failed write leaves the old file and no temporary one; a good one
// replaces it with the mode asked for.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	put := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := Write(p, 0o600, put("one")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := Write(p, 0o644, func(w io.Writer) error { put("half")(w); return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Errorf("%q after a failed write", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("left behind: %v", es)
	}
	if err := Write(p, 0o644, put("two")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}
	if err := Write(filepath.Join(dir, "no", "dir"), 0o644, put("x")); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}
