package engine

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/fixture"
	"github.com/cnibench/cnibench/pkg/result"
)

// These tests run over 127.0.0.1 only (no root needed).

func startServerWith(t *testing.T, o ServerOptions) *Server {
	t.Helper()
	o.Listen, o.Version = "127.0.0.1:0", "test"
	s, err := Listen(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Serve(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop within 10s")
		}
	})
	return s
}

func TestTokenAuth(t *testing.T) {
	s := startServerWith(t, ServerOptions{Token: "s3cret"})
	open := startServerWith(t, ServerOptions{})
	for _, tc := range []struct {
		name   string
		srv    *Server
		token  string
		wantOK bool
		say    string
	}{
		{"same token", s, "s3cret", true, ""},
		{"client without token", s, "", false, "requires a token"},
		{"wrong token", s, "guess", false, "did not prove the token"},
		{"server without token", open, "s3cret", false, "did not prove the token"},
		{"neither has one", open, "", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts(tc.srv, result.TCPLat, 1)
			o.Token = tc.token
			r, err := Run(context.Background(), o)
			if tc.wantOK {
				if err != nil || r.Latency == nil {
					t.Fatalf("want a measurement, got %v", err)
				}
				return
			}
			if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("want ErrAuth saying %q, got %v", tc.say, err)
			}
		})
	}
	if n := sessions(s); n != 0 {
		t.Fatalf("%d sessions left", n)
	}
}

// A peer that skips the client's own check (a raw hello and a setup with a
// forged or missing proof) is refused by the server itself.
func TestTokenServerRefusesForgedProof(t *testing.T) {
	s := startServerWith(t, ServerOptions{Token: "s3cret"})
	for _, proof := range [][]byte{nil, bytes.Repeat([]byte{1}, 32), authProof("wrong", "client", nil, nil)} {
		c := rawControl(t, s)
		_ = writeMsg(c, &Msg{Type: msgHello, Proto: ProtoVersion})
		w, err := readMsg(c, msgWelcome)
		if err != nil || len(w.Nonce) != nonceLen || w.Proof != nil {
			t.Fatalf("welcome: %+v %v (want a nonce and no proof for a client that sent no nonce)", w, err)
		}
		_ = writeMsg(c, &Msg{Type: msgSetup, Proof: proof, Setup: &Setup{Test: result.TCPLat, MsgSize: 1, Parallel: 1, DurationNs: 1e8}})
		_, err = readMsg(c, msgReady)
		if !errors.Is(err, ErrAuth) {
			t.Fatalf("proof %x: want the server's auth refusal, got %v", proof, err)
		}
		c.Close()
	}
}

// The token never crosses the wire: everything a full authenticated session
// sends, both ways, through a recording proxy, lacks it.
func TestTokenNeverSent(t *testing.T) {
	const token = "a-token-that-must-not-appear"
	s := startServerWith(t, ServerOptions{Token: token})
	var rec bytes.Buffer
	var mu sync.Mutex
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	copyRec := func(dst, src net.Conn) {
		buf := make([]byte, 4096)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				mu.Lock()
				rec.Write(buf[:n])
				mu.Unlock()
				_, _ = dst.Write(buf[:n])
			}
			if err != nil {
				dst.Close()
				return
			}
		}
	}
	fixture.Serve(t, ln, func(in net.Conn) {
		out, err := net.Dial("tcp", s.Addr())
		if err != nil {
			in.Close()
			return
		}
		go copyRec(out, in)
		copyRec(in, out)
	})
	o := opts(s, result.TCPLat, 1)
	o.Port = ln.Addr().(*net.TCPAddr).Port
	o.Token = token
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if rec.Len() < 100 || bytes.Contains(rec.Bytes(), []byte(token)) {
		t.Fatalf("recorded %d bytes; token present: %v", rec.Len(), bytes.Contains(rec.Bytes(), []byte(token)))
	}
}

func rawControl(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(preamble(kindControl, 0, 0)); err != nil {
		t.Fatal(err)
	}
	return c
}

// holdSession opens a session slot (hello answered with a welcome) and
// keeps it until the test ends.
func holdSession(t *testing.T, s *Server) {
	c := rawControl(t, s)
	t.Cleanup(func() { c.Close() })
	_ = writeMsg(c, &Msg{Type: msgHello, Proto: ProtoVersion})
	if _, err := readMsg(c, msgWelcome); err != nil {
		t.Fatalf("holding a session: %v", err)
	}
}

func TestSessionLimits(t *testing.T) {
	for _, c := range []struct {
		name  string
		o     ServerOptions
		held  int    // sessions held open before the refused one
		names string // what the refusal must name
	}{
		{"max sessions", ServerOptions{MaxSessions: 2}, 2, "--max-sessions"},
		{"per source", ServerOptions{MaxPerSource: 1}, 1, "127.0.0.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startServerWith(t, c.o)
			for range c.held {
				holdSession(t, s)
			}
			_, err := Run(context.Background(), opts(s, result.TCPLat, 1))
			if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), c.names) {
				t.Fatalf("want ErrBusy naming %s, got %v", c.names, err)
			}
		})
	}
	t.Run("slot released", func(t *testing.T) {
		s := startServerWith(t, ServerOptions{MaxSessions: 1})
		for i := 0; i < 3; i++ {
			if _, err := Run(context.Background(), opts(s, result.TCPLat, 1)); err != nil {
				t.Fatalf("session %d: %v", i, err)
			}
		}
	})
}

func openFDs(t *testing.T) int {
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(des)
}

// Stalled and stray connections are bounded by MaxPending, and every
// goroutine and descriptor they took is given back when they go away.
func TestPendingBoundAndRelease(t *testing.T) {
	s := startServerWith(t, ServerOptions{MaxPending: 8})
	time.Sleep(50 * time.Millisecond)
	fds0, g0 := openFDs(t), runtime.NumGoroutine()
	var conns []net.Conn
	for i := 0; i < 40; i++ {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			_, _ = c.Write([]byte("CNB")) // a partial preamble, then silence
		}
		conns = append(conns, c)
	}
	// The server closes what it cannot take: at most MaxPending stay open.
	deadline := time.Now().Add(3 * time.Second)
	for int(s.pending.Load()) > 8 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if p := s.pending.Load(); p > 8 {
		t.Fatalf("%d pending connections (bound 8)", p)
	}
	open := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		var ne net.Error
		if _, err := c.Read(make([]byte, 1)); errors.As(err, &ne) && ne.Timeout() {
			open++ // the server still holds it (a close reads as EOF or a reset)
		}
	}
	if open > 8 {
		t.Fatalf("%d connections held open by the server (bound 8)", open)
	}
	for _, c := range conns {
		c.Close()
	}
	deadline = time.Now().Add(5 * time.Second)
	for (s.pending.Load() != 0 || runtime.NumGoroutine() > g0+2 || openFDs(t) > fds0) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p, g, f := s.pending.Load(), runtime.NumGoroutine(), openFDs(t); p != 0 || g > g0+2 || f > fds0 {
		t.Fatalf("after the peers left: pending %d, goroutines %d (baseline %d), fds %d (baseline %d)", p, g, g0, f, fds0)
	}
	// And it still serves.
	if _, err := Run(context.Background(), opts(s, result.TCPLat, 1)); err != nil {
		t.Fatal(err)
	}
}

func TestInsecure(t *testing.T) {
	for _, tc := range []struct {
		ip    string
		token string
		want  bool
	}{{"127.0.0.1", "", false}, {"::1", "", false}, {"0.0.0.0", "", true}, {"10.1.2.3", "", true}, {"0.0.0.0", "x", false}} {
		if got := Insecure(net.ParseIP(tc.ip), tc.token); got != tc.want {
			t.Errorf("Insecure(%s, %q) = %v", tc.ip, tc.token, got)
		}
	}
}

// ServeCommand checks the admission bounds above before it listens, and
// warns when it listens insecurely (see TestInsecure).
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
