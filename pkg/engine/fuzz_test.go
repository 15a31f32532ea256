package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
)

// Fuzz targets for everything the server reads from the network. `make fuzz`
// runs each for a while; `go test` runs only the seed corpora (below and in
// testdata/fuzz/<Target>/), which is how every crash found becomes a
// regression test.

// FuzzPreamble: any 12 bytes either are refused or round-trip exactly.
func FuzzPreamble(f *testing.F) {
	f.Add(preamble(kindControl, 1, 0))
	f.Add(preamble(kindCRR, math.MaxUint32, 7))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		kind, session, stream, err := parsePreamble(in)
		if err != nil {
			return
		}
		if out := preamble(kind, session, stream); !bytes.Equal(out, in[:preambleLen]) {
			t.Fatalf("preamble %x parsed as (%q,%d,%d) which writes %x", in[:preambleLen], kind, session, stream, out)
		}
	})
}

// FuzzUDPHello: the attach datagram is accepted only at its exact length and
// magic, and round-trips.
func FuzzUDPHello(f *testing.F) {
	var b [udpHelloLen]byte
	putUDPHello(b[:], udpHelloMagic, 3, 1)
	f.Add(b[:])
	f.Add(append(b[:], 0))
	f.Fuzz(func(t *testing.T, in []byte) {
		session, stream, ok := parseUDPHello(in, udpHelloMagic)
		if !ok {
			return
		}
		var out [udpHelloLen]byte
		putUDPHello(out[:], udpHelloMagic, session, stream)
		if !bytes.Equal(out[:], in) {
			t.Fatalf("hello %x parsed as (%d,%d) which writes %x", in, session, stream, out)
		}
	})
}

func frame(m *Msg) []byte {
	var buf bytes.Buffer
	if err := writeMsg(&buf, m); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// FuzzReadMsg: control frames of any content and length never panic, never
// allocate past maxFrame, and what decodes re-encodes to the same message.
func FuzzReadMsg(f *testing.F) {
	f.Add(frame(&Msg{Type: msgHello, Proto: ProtoVersion, Version: "x"}))
	f.Add(frame(&Msg{Type: msgSetup, Setup: &Setup{Test: result.TCPLat, MsgSize: 1, Parallel: 1, DurationNs: 1e9}}))
	f.Add(frame(&Msg{Type: msgStop, UDPSent: []int64{1, 2, 3}}))
	f.Add(frame(&Msg{Type: msgError, Error: "no"}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, '{'})
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := readMsg(bytes.NewReader(in), "")
		if err != nil {
			var pe *PeerError
			if errors.As(err, &pe) && len(in) < 4 {
				t.Fatalf("peer error from %d bytes", len(in))
			}
			return
		}
		if n := binary.BigEndian.Uint32(in); n == 0 || n > maxFrame {
			t.Fatalf("accepted frame length %d", n)
		}
		again, err := readMsg(bytes.NewReader(frame(m)), m.Type)
		if err != nil {
			t.Fatalf("re-read of %+v: %v", m, err)
		}
		a, _ := json.Marshal(m)
		b, _ := json.Marshal(again)
		if !bytes.Equal(a, b) {
			t.Fatalf("message changed on a round trip:\n%s\n%s", a, b)
		}
	})
}

// FuzzCheckSetup: a setup the server accepts is one it can run: a real test,
// a size the socket loops take, a bounded positive duration with no
// overflow in duration+warmup.
func FuzzCheckSetup(f *testing.F) {
	f.Add(result.TCPLat, 1, 1, int64(time.Second), int64(0), 0.0)
	f.Add(result.UDPBW, 65507, 128, int64(time.Minute), int64(time.Second), 1e9)
	f.Add(result.TCPBW, 16<<20, 1, int64(math.MaxInt64), int64(1), 0.0)
	f.Add(result.UDPLat, 65508, 1, int64(1), int64(math.MaxInt64), math.NaN())
	s := &Server{o: ServerOptions{MaxSession: 10 * time.Minute}}
	f.Fuzz(func(t *testing.T, test string, size, par int, dur, warm int64, rate float64) {
		st := &Setup{Test: test, MsgSize: size, Parallel: par, DurationNs: dur, WarmupNs: warm, RateBps: rate}
		if err := s.checkSetup(st); err != nil {
			return
		}
		if !result.ValidTest(test) || size < 1 || par < 1 || par > MaxParallel {
			t.Fatalf("accepted %+v", st)
		}
		if dur <= 0 || warm < 0 || dur > int64(s.o.MaxSession) || warm > int64(s.o.MaxSession) || dur+warm > int64(s.o.MaxSession) {
			t.Fatalf("accepted duration %d + warmup %d (limit %v)", dur, warm, s.o.MaxSession)
		}
		if math.IsNaN(rate) || math.IsInf(rate, 0) || rate < 0 {
			t.Fatalf("accepted rate %v", rate)
		}
	})
}

// FuzzSeqTracker: whatever order, repetition or gaps the sequence numbers of
// a udp_bw stream arrive in, every datagram is counted exactly once as
// received or duplicated, and out-of-order never exceeds received.
func FuzzSeqTracker(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4})
	f.Add([]byte{5, 4, 3, 2, 1, 1, 1})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		tr := newSeqTracker(true, false)
		n := int64(0)
		for len(in) > 0 {
			// One byte for a small step, or 0xff + 8 bytes for an arbitrary
			// sequence number (jumps past the window included).
			var seq uint64
			if in[0] == 0xff && len(in) >= 9 {
				seq = binary.LittleEndian.Uint64(in[1:9]) >> 1 // measured bit off
				in = in[9:]
			} else {
				seq = uint64(in[0])
				in = in[1:]
			}
			tr.add(seq, int64(seq), int64(seq)+int64(n))
			n++
		}
		c := tr.count()
		if c.Received+c.Duplicated != n {
			t.Fatalf("%d datagrams, received %d + duplicated %d", n, c.Received, c.Duplicated)
		}
		if c.OutOfOrder > c.Received {
			t.Fatalf("out of order %d > received %d", c.OutOfOrder, c.Received)
		}
		if c.JitterNs != nil && (math.IsNaN(*c.JitterNs) || *c.JitterNs < 0) {
			t.Fatalf("jitter %v", *c.JitterNs)
		}
	})
}

// FuzzServerSession drives a real server's control connection with any
// sequence of bytes — hello, setup, start and stop in any order and of any
// size — then checks the server still serves a legitimate client. The
// server listens on 127.0.0.1 only.
func FuzzServerSession(f *testing.F) {
	hello := frame(&Msg{Type: msgHello, Proto: ProtoVersion, Version: "fuzz"})
	setup := frame(&Msg{Type: msgSetup, Setup: &Setup{Test: result.TCPLat, MsgSize: 1, Parallel: 1, DurationNs: int64(50 * time.Millisecond)}})
	start, stop := frame(&Msg{Type: msgStart}), frame(&Msg{Type: msgStop, UDPSent: []int64{5}})
	pre := preamble(kindControl, 0, 0)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	f.Add(cat(pre, hello, setup, start, stop))
	f.Add(cat(pre, hello, stop, start, setup))
	f.Add(cat(pre, setup))
	f.Add(cat(pre, hello, hello, hello))
	f.Add(cat(pre, []byte{0, 0, 0, 0}))
	f.Add(cat(pre, frame(&Msg{Type: msgSetup, Setup: &Setup{Test: result.UDPBW, MsgSize: 1, Parallel: 128, DurationNs: 1}})))
	f.Add(cat(preamble(kindData, 1, 0), []byte("xxxx")))
	f.Add(cat(preamble(kindCRR, 9, 9), []byte{1}))

	s, err := Listen(ServerOptions{Listen: "127.0.0.1:0", Version: "fuzz", MaxSession: 2 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = s.Serve(ctx); close(done) }()
	f.Cleanup(func() { cancel(); <-done })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))

	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write(in)
		_ = c.(*net.TCPConn).CloseWrite()
		// The server must end the connection by itself once our bytes
		// run out: read until EOF (or its error reply and close).
		if _, err := io.Copy(io.Discard, c); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("server kept a connection open 5 s after the client's input ended")
			}
		}
		c.Close()
		// Every session the input opened ends with its connection.
		for deadline := time.Now().Add(3 * time.Second); sessions(s) > 0; {
			if time.Now().After(deadline) {
				t.Fatalf("%d sessions still open 3 s after their control connection closed", sessions(s))
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// FuzzUDPHeader: whatever a datagram holds, reading its header never
// panics; a datagram the sender built is read back exactly: its sequence
// number from 8 bytes up, its send time from 16, the measured flag alone
// below 8 (count-only streams).
func FuzzUDPHeader(f *testing.F) {
	f.Add([]byte{0x80, 0, 0, 0, 0, 0, 0, 1}, uint64(1), int64(5), 64, true)
	f.Add([]byte("CNBU\x00\x00\x00\x01\x00\x00\x00\x00"), uint64(0), int64(0), 1, false)
	f.Add([]byte{}, uint64(1<<62), int64(-1), 15, false)
	f.Fuzz(func(t *testing.T, raw []byte, seq uint64, sendNs int64, size int, measured bool) {
		_, _, _ = readUDPHdr(raw, true)
		_, _, _ = readUDPHdr(raw, false)
		if size < 1 || size > 65507 {
			return
		}
		seq &^= measuredBit
		hdr := seq
		if measured {
			hdr |= measuredBit
		}
		b := make([]byte, size)
		putUDPHdr(b, hdr, sendNs)
		kind, gotSeq, gotTS := readUDPHdr(b, size < udpHdrMin)
		switch {
		case !measured:
			if kind != udpIgnored {
				t.Fatalf("warmup datagram of %d bytes read as %v", size, kind)
			}
		case size < udpHdrMin:
			if kind != udpShortMeasured {
				t.Fatalf("measured %d-byte datagram read as %v", size, kind)
			}
		default:
			wantTS := int64(0)
			if size >= udpHdrTS {
				wantTS = sendNs
			}
			if kind != udpMeasured || gotSeq != seq || gotTS != wantTS {
				t.Fatalf("%d bytes seq %d ts %d read as %v %d %d", size, seq, sendNs, kind, gotSeq, gotTS)
			}
		}
	})
}
