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
	db, path := create(t)
	defer db.Close()
	fill(db)
	return path
}

// Open creates an empty results database in the test's temporary
// directory, for a test that stores and reads through one handle; it is
// closed when the test ends.
func Open(t testing.TB) *store.DB {
	t.Helper()
	db, _ := create(t)
	t.Cleanup(func() { db.Close() })
	return db
}

func create(t testing.TB) (*store.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return db, path
}
