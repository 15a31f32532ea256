package tune

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/fixture"
)

// HoldUntil writes the limit, holds it until the context ends and says so;
// a fixture /dev stands in for the kernel's file.
func TestHoldUntil(t *testing.T) {
	root := fixture.Tree(t, map[string]string{"dev/cpu_dma_latency": "\x00\x00\x00\x00"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var b bytes.Buffer
	if err := HoldUntil(ctx, EnvAt(root), 7, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "holding cpu_dma_latency at 7 µs (kernel now reports 7)") || !strings.Contains(b.String(), "released") {
		t.Errorf("%s", b.String())
	}
	if err := HoldUntil(ctx, EnvAt(filepath.Join(root, "none")), 7, &b); err == nil {
		t.Error("held a limit without the file")
	}
	if err := HoldUntil(ctx, EnvAt(root), -1, &b); !errors.Is(err, ErrInvalid) || err.Error() != "--us -1: must be 0 or more microseconds" {
		t.Errorf("a negative limit: %v", err)
	}
}
