package testns

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binOut  []byte
)

// Binary returns the cnibench binary for end-to-end tests: $CNIBENCH_BIN
// (which `make test` sets), or one `go build` shared by the whole test
// binary. It never falls back to the test executable itself, which would
// run the tests again as "cnibench client".
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("CNIBENCH_BIN"); b != "" {
		return b
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cnibench-test-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "cnibench")
		binOut, binErr = exec.Command("go", "build", "-o", binPath, "github.com/cnibench/cnibench/cmd/cnibench").CombinedOutput()
	})
	if binErr != nil {
		t.Fatalf("go build cnibench: %v\n%s", binErr, binOut)
	}
	return binPath
}
