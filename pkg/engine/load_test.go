package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"golang.org/x/sys/unix"
)

// TestLoadHalfHostile runs one `cnibench server` (the built binary, so its
// memory, descriptors and goroutines are its own) under 200 concurrent peers
// on 127.0.0.1 for CNIBENCH_LOAD_DURATION (default 10 s; `make bench-load`
// runs 60 s): 100 legitimate clients measuring back to back, and 100 that
// send garbage, stall, vanish mid-session or flood UDP. Every legitimate
// session must complete with a result; afterwards the server's sessions,
// pending connections, goroutines and descriptors return to their baseline.
func TestLoadHalfHostile(t *testing.T) {
	bin := os.Getenv("CNIBENCH_BIN")
	if bin == "" {
		t.Skip("needs CNIBENCH_BIN (the built cnibench) to run the server as its own process")
	}
	dur := 10 * time.Second
	if v := os.Getenv("CNIBENCH_LOAD_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("CNIBENCH_LOAD_DURATION=%q: want a positive duration", v)
		}
		dur = d
	}
	srv := exec.Command(bin, "server", "--listen", "127.0.0.1:0",
		"--max-sessions", "256", "--max-per-source", "256", "--quiet")
	addr, stats := startCommand(t, srv, (*exec.Cmd).Start, "stats ")
	_, ps, _ := net.SplitHostPort(addr)
	port, err := strconv.Atoi(ps)
	if err != nil {
		t.Fatalf("server address %q: %v", addr, err)
	}
	base := serverStats(t, srv.Process.Pid, stats)
	t.Logf("baseline: %v", base)

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	tests := []string{result.TCPLat, result.UDPLat, result.TCPCRR, result.TCPBW, result.UDPBW}
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				test := tests[(i+n)%len(tests)]
				o := ClientOptions{Server: "127.0.0.1", Port: port, Test: test, MsgSize: 64,
					Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond, Version: "test",
					ConnectTimeout: 30 * time.Second}
				if test == result.UDPBW {
					o.RateBps = 2e6
				}
				// A session that starts is finished even if the load window
				// closes meanwhile: only a completed session counts.
				r, err := Run(context.Background(), o)
				if err != nil || r == nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %v", test, err))
					continue
				}
				ok.Add(1)
			}
		}(i)
	}
	var hostile atomic.Int64
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for ctx.Err() == nil {
				hostilePeer(ctx, addr, rng)
				hostile.Add(1)
			}
		}(i)
	}
	peak := 0
	sampler := time.NewTicker(500 * time.Millisecond)
	go func() {
		<-ctx.Done()
		sampler.Stop()
	}()
	for ctx.Err() == nil {
		select {
		case <-sampler.C:
			if rss := procStatusKB(srv.Process.Pid, "VmRSS"); rss > peak {
				peak = rss
			}
		case <-ctx.Done():
		}
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Errorf("%d of %d legitimate sessions failed, first: %v", f, f+ok.Load(), firstErr.Load())
	}
	if ok.Load() < 100 {
		t.Errorf("only %d legitimate sessions completed", ok.Load())
	}
	// Back to baseline: stalled peers are dropped by the server's own
	// timeouts (5 s for a preamble, 10 s for a hello).
	var after map[string]int
	deadline := time.Now().Add(20 * time.Second)
	for {
		after = serverStats(t, srv.Process.Pid, stats)
		if after["sessions"] == 0 && after["pending"] == 0 && after["goroutines"] <= base["goroutines"]+2 && after["fds"] <= base["fds"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not return to its baseline within 20 s: %v (baseline %v)", after, base)
		}
		time.Sleep(500 * time.Millisecond)
	}
	hwm := procStatusKB(srv.Process.Pid, "VmHWM")
	t.Logf("%v load: %d legitimate sessions completed, %d failed; %d hostile connections; server RSS peak sampled %d KiB, VmHWM %d KiB; after: %v",
		dur, ok.Load(), failed.Load(), hostile.Load(), peak, hwm, after)
	// A bound, not a benchmark: 200 peers must not take the server past
	// 256 MiB (each session's buffers are bounded by its message size).
	if hwm > 256*1024 {
		t.Errorf("server peak RSS %d KiB > 256 MiB", hwm)
	}
}

// hostilePeer does one thing a broken or malicious peer does.
func hostilePeer(ctx context.Context, addr string, rng *rand.Rand) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		time.Sleep(10 * time.Millisecond)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	switch rng.IntN(7) {
	case 0: // garbage
		b := make([]byte, 1+rng.IntN(512))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		_, _ = c.Write(b)
	case 1: // connect and say nothing until the server gives up
		waitClosed(ctx, c)
	case 2: // a hello, then silence
		_, _ = c.Write(preamble(kindControl, 0, 0))
		_ = writeMsg(c, &Msg{Type: msgHello, Proto: ProtoVersion})
		waitClosed(ctx, c)
	case 3: // an oversized frame length
		_, _ = c.Write(append(preamble(kindControl, 0, 0), 0x7f, 0xff, 0xff, 0xff, '{'))
		waitClosed(ctx, c)
	case 4: // a valid session that vanishes after setup
		_, _ = c.Write(preamble(kindControl, 0, 0))
		_ = writeMsg(c, &Msg{Type: msgHello, Proto: ProtoVersion})
		if _, err := readMsg(c, msgWelcome); err == nil {
			_ = writeMsg(c, &Msg{Type: msgSetup, Setup: &Setup{Test: result.TCPBW, MsgSize: 65536, Parallel: 8, DurationNs: int64(time.Second)}})
			_, _ = readMsg(c, msgReady)
		}
	case 5: // data streams for sessions that do not exist
		_, _ = c.Write(append(preamble(kindData, rng.Uint32(), rng.Uint32N(8)), bytes.Repeat([]byte{1}, 1024)...))
	case 6: // a burst of junk datagrams on the UDP port
		u, err := net.Dial("udp", addr)
		if err == nil {
			for i := 0; i < 200; i++ {
				_, _ = u.Write([]byte{byte(i), 'C', 'N', 'B', 'U', 0, 0, 0, 1, 0, 0, 0})
			}
			u.Close()
		}
	}
}

func waitClosed(ctx context.Context, c net.Conn) {
	buf := make([]byte, 512)
	for ctx.Err() == nil {
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
	}
}

var statRE = regexp.MustCompile(`(\w+)=(\d+)`)

// serverStats asks the server (SIGUSR1) for its counts. The signal is sent
// again every 500 ms until a line comes: the server announces where it
// listens a moment before it installs its SIGUSR1 handler, and a signal that
// arrives in between is ignored. Lines left from an earlier call are
// dropped first, so a late answer is never taken for this one.
func serverStats(t *testing.T, pid int, lines <-chan string) map[string]int {
	t.Helper()
	for len(lines) > 0 {
		<-lines
	}
	deadline := time.After(5 * time.Second)
	for {
		if err := unix.Kill(pid, unix.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("server exited before printing its stats")
			}
			m := map[string]int{}
			for _, kv := range statRE.FindAllStringSubmatch(l, -1) {
				m[kv[1]], _ = strconv.Atoi(kv[2])
			}
			return m
		case <-time.After(500 * time.Millisecond):
		case <-deadline:
			t.Fatal("server printed no stats within 5 s of SIGUSR1")
			return nil
		}
	}
}

func procStatusKB(pid int, key string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key+":") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				n, _ := strconv.Atoi(f[1])
				return n
			}
		}
	}
	return 0
}
