// Package storetest makes results databases for tests.
package storetest

import (
	"errors"
	"os"
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

// Untouched is a results database path in the test's temporary directory
// for commands that must refuse before they store anything: the test fails
// if a database is there when it ends.
func Untouched(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.db")
	// Runs before TempDir's own cleanup removes the directory.
	t.Cleanup(func() {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused command created the database %s (stat: %v)", path, err)
		}
	})
	return path
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
