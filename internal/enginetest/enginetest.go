// Package enginetest runs a real cnibench server for tests outside
// pkg/engine (whose own tests have theirs: it cannot import this).
package enginetest

import (
	"context"
	"testing"

	"github.com/cnibench/cnibench/pkg/engine"
)

// Server runs a real `cnibench server` on a free loopback port until
// t ends, and returns its address (127.0.0.1:PORT).
func Server(t testing.TB) string {
	t.Helper()
	s, err := engine.Listen(engine.ServerOptions{Listen: "127.0.0.1:0", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s.Addr()
}
