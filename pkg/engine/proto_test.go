package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
)

// preamble returns the bytes that open a connection of kind, as the client
// writes them.
func preamble(kind byte, session, stream uint32) []byte {
	b := make([]byte, preambleLen)
	putPreamble(b, kind, session, stream)
	return b
}

func TestPreamble(t *testing.T) {
	k, s, st, err := parsePreamble(preamble(kindData, 0xdeadbeef, 7))
	if err != nil || k != kindData || s != 0xdeadbeef || st != 7 {
		t.Fatalf("round trip: %c %x %d %v", k, s, st, err)
	}
	for _, bad := range [][]byte{[]byte("GET / HTTP/1.1\r\n"), []byte("CNB"), append([]byte("CNBX"), make([]byte, 8)...)} {
		if _, _, _, err := parsePreamble(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	var h [udpHelloLen]byte
	putUDPHello(h[:], udpHelloMagic, 5, 6)
	if s, st, ok := parseUDPHello(h[:], udpHelloMagic); !ok || s != 5 || st != 6 {
		t.Errorf("udp hello round trip: %d %d %v", s, st, ok)
	}
	if _, _, ok := parseUDPHello(h[:], udpAckMagic); ok {
		t.Error("hello parsed as ack")
	}
	if _, _, ok := parseUDPHello(h[:8], udpHelloMagic); ok {
		t.Error("short hello accepted")
	}
}

func TestMsgRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	in := &Msg{Type: msgSetup, Setup: &Setup{Test: result.UDPBW, MsgSize: 64, Parallel: 2, DurationNs: 3e9, RateBps: 1e8}}
	if err := writeMsg(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := readMsg(&buf, msgSetup)
	if err != nil {
		t.Fatal(err)
	}
	if *out.Setup != *in.Setup {
		t.Errorf("setup %+v != %+v", out.Setup, in.Setup)
	}
	// wrong type
	_ = writeMsg(&buf, &Msg{Type: msgReady})
	if _, err := readMsg(&buf, msgSetup); err == nil || !strings.Contains(err.Error(), `got "ready"`) {
		t.Errorf("wrong type: %v", err)
	}
	// an error message becomes a PeerError with its text
	_ = writeMsg(&buf, &Msg{Type: msgError, Error: "no such test"})
	_, err = readMsg(&buf, msgReady)
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Msg != "no such test" {
		t.Errorf("peer error: %v", err)
	}
	// oversized and zero-length frames are refused before allocating
	for _, n := range []uint32{0, maxFrame + 1, 0xffffffff} {
		var h [4]byte
		binary.BigEndian.PutUint32(h[:], n)
		if _, err := readMsg(bytes.NewReader(h[:]), ""); err == nil || !strings.Contains(err.Error(), "frame length") {
			t.Errorf("frame length %d: %v", n, err)
		}
	}
	// garbage JSON
	g := []byte{0, 0, 0, 3, '{', 'x', '}'}
	if _, err := readMsg(bytes.NewReader(g), ""); err == nil {
		t.Error("garbage accepted")
	}
	// truncated frame
	if _, err := readMsg(bytes.NewReader([]byte{0, 0, 0, 9, '{'}), ""); err == nil {
		t.Error("truncated frame accepted")
	}
}

func TestVersionErrorText(t *testing.T) {
	e := &VersionError{Client: 2, Server: 1, ClientVersion: "v2.0", ServerVersion: "v1.0"}
	s := e.Error()
	for _, want := range []string{"protocol version mismatch", "v2", "v1", "same cnibench"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
}
