// Package storetest makes results databases for tests.
package storetest

import (
	"path/filepath"
	"testing"

	"github.com/cnibench/cnibench/pkg/store"
)

// New creates a results database in the test's temporary directory, lets
// fill store what the test needs, closes it and returns its path.
func New(t testing.TB, fill func(db *store.DB)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fill(db)
	return path
}
