// Package fuzzseed feeds committed files to fuzz targets as seed corpora, so
// a parser's fuzzing starts from the real outputs its golden tests use.
package fuzzseed

import (
	"os"
	"path/filepath"
	"testing"
)

// AddFiles adds every file matching glob (relative to the test's package) to
// f's corpus; a glob matching nothing fails the target, so a moved testdata
// folder cannot silently leave a fuzzer without seeds.
func AddFiles(f *testing.F, glob string) {
	f.Helper()
	paths, err := filepath.Glob(glob)
	if err != nil || len(paths) == 0 {
		f.Fatalf("fuzz seeds %s: no files (%v)", glob, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}
