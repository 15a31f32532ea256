package engine

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestServeCommandRefusesZeroBounds(t *testing.T) {
	for _, o := range []ServerOptions{
		{Listen: "127.0.0.1:0", MaxSession: 0, MaxSessions: 1, MaxPerSource: 1},
		{Listen: "127.0.0.1:0", MaxSession: time.Minute, MaxSessions: 0, MaxPerSource: 1},
		{Listen: "127.0.0.1:0", MaxSession: time.Minute, MaxSessions: 1, MaxPerSource: 0},
	} {
		var log bytes.Buffer
		if err := ServeCommand(context.Background(), o, &log); !errors.Is(err, ErrInvalid) || log.Len() > 0 {
			t.Errorf("%+v: got %v, logged %q; want ErrInvalid before listening", o, err, log.String())
		}
	}
}

// On loopback without a token the server says where it listens, with no
// warning, and returns when its context ends.
func TestServeCommandServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	o := ServerOptions{Listen: "127.0.0.1:0", Version: "test", MaxSession: time.Minute, MaxSessions: 2, MaxPerSource: 1}
	var log bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- ServeCommand(ctx, o, &log) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop when its context ended")
	}
	if s := log.String(); !strings.HasPrefix(s, "cnibench server test listening on 127.0.0.1:") || strings.Contains(s, "warning") {
		t.Errorf("log %q", s)
	}
}
