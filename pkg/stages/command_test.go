package stages

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/cnibench/cnibench/pkg/store"
)

func TestExplainCommandUnknownInput(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	err := ExplainCommand{DBPath: filepath.Join(dir, "missing.db"), Run: "last", A: "a", B: "b"}.Print(&out)
	if !errors.Is(err, store.ErrNoDatabase) {
		t.Errorf("missing database: %v", err)
	}
	path := filepath.Join(dir, "r.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := (ExplainCommand{DBPath: path, Run: "7", A: "a", B: "b", JSON: true}).Print(&out); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
	if out.Len() > 0 {
		t.Errorf("printed %q", out.String())
	}
}
