package engine

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cnibench/cnibench/pkg/limits"
	"github.com/cnibench/cnibench/pkg/result"
)

// ProtoVersion is the wire protocol version. Client and server refuse to
// talk across versions; bump it on any change to the messages below.
// Version 4: the report's cpu carries ran_on, where the server's loops ran.
const ProtoVersion = 4

// DefaultPort is the one port number a server uses for TCP and UDP alike, so
// a Kubernetes Service or a firewall rule names a single port.
const DefaultPort = limits.DefaultPort

// Every TCP connection to the port starts with a fixed 12-byte preamble, so
// control, data and tcp_crr connections share the listener:
//
//	"CNB" kind(1) session(uint32 BE) stream(uint32 BE)
//
// The preamble never changes across protocol versions, so an old server can
// still read a new client's hello and say which versions differ.
const preambleLen = 12

// Connection kinds in the preamble.
const (
	kindControl = 'C' // JSON control messages
	kindData    = 'D' // a tcp_lat or tcp_bw stream of a session
	kindCRR     = 'R' // one tcp_crr transaction: request follows the preamble
)

// UDP datagrams that attach a client socket to a session: the client sends
// "CNBU" session stream to the server's port until the server answers "CNBA"
// session stream from the socket it connected back to the client.
const udpHelloLen = 12

var (
	magicTCP      = [3]byte{'C', 'N', 'B'}
	udpHelloMagic = [4]byte{'C', 'N', 'B', 'U'}
	udpAckMagic   = [4]byte{'C', 'N', 'B', 'A'}
)

func putPreamble(b []byte, kind byte, session, stream uint32) {
	copy(b, magicTCP[:])
	b[3] = kind
	binary.BigEndian.PutUint32(b[4:], session)
	binary.BigEndian.PutUint32(b[8:], stream)
}

func parsePreamble(b []byte) (kind byte, session, stream uint32, err error) {
	if len(b) < preambleLen || b[0] != 'C' || b[1] != 'N' || b[2] != 'B' {
		return 0, 0, 0, errors.New("not a cnibench connection (bad preamble)")
	}
	switch b[3] {
	case kindControl, kindData, kindCRR:
	default:
		return 0, 0, 0, fmt.Errorf("unknown connection kind %q", b[3])
	}
	return b[3], binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:]), nil
}

func putUDPHello(b []byte, magic [4]byte, session, stream uint32) {
	copy(b, magic[:])
	binary.BigEndian.PutUint32(b[4:], session)
	binary.BigEndian.PutUint32(b[8:], stream)
}

func parseUDPHello(b []byte, magic [4]byte) (session, stream uint32, ok bool) {
	if len(b) != udpHelloLen || b[0] != magic[0] || b[1] != magic[1] || b[2] != magic[2] || b[3] != magic[3] {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:]), true
}

// Message types on the control connection, in the order they flow:
//
//	client → hello          server → welcome (or error)
//	client → setup          server → ready (or error)
//	client opens the data streams
//	client → start          server → started (warmup over: the server has
//	                        snapshot its counters; only now does the client
//	                        mark data as measured, so the server's kernel
//	                        counters cover every measured datagram)
//	client → stop           server → report
const (
	msgHello   = "hello"
	msgWelcome = "welcome"
	msgSetup   = "setup"
	msgReady   = "ready"
	msgStart   = "start"
	msgStarted = "started"
	msgStop    = "stop"
	msgReport  = "report"
	msgError   = "error"
)

// maxFrame bounds a control message, so a malformed client cannot make the
// server allocate without limit.
const maxFrame = 1 << 20

// Msg is one control message: a type and the fields that type uses.
type Msg struct {
	Type string `json:"type"`

	// hello / welcome
	Proto   int                 `json:"proto,omitempty"`
	Version string              `json:"version,omitempty"` // cnibench version of the sender
	Session uint32              `json:"session,omitempty"`
	Env     *result.Fingerprint `json:"env,omitempty"`

	// setup
	Setup *Setup `json:"setup,omitempty"`

	// stop: datagrams each udp_bw stream sent in the measured interval
	UDPSent []int64 `json:"udp_sent,omitempty"`

	// report
	Report *Report `json:"report,omitempty"`

	// hello (client) / welcome (server): a fresh random challenge; a server
	// with a token always sends one, a client with a token always does.
	Nonce []byte `json:"nonce,omitempty"`
	// welcome / setup: the HMAC that proves the token (see auth.go).
	Proof []byte `json:"proof,omitempty"`

	// error
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"` // codeAuth, codeBusy or empty
}

// Setup asks the server for one test.
type Setup struct {
	Test       string  `json:"test"`
	MsgSize    int     `json:"msg_size"`
	Parallel   int     `json:"parallel"`
	DurationNs int64   `json:"duration_ns"`
	WarmupNs   int64   `json:"warmup_ns"`
	RateBps    float64 `json:"rate_bps"`
}

// Report is the server's side of a measurement.
type Report struct {
	// CPU is the server's side of result.CPU, with RanOn: where this
	// session's loops ran (protocol 4).
	CPU *result.CPUSide `json:"cpu"`
	// Seconds between the start and stop marks on the server's clock.
	Seconds float64 `json:"seconds"`
	// Per stream: bytes received in the measured interval (tcp_bw, udp_bw).
	BytesReceived []int64 `json:"bytes_received,omitempty"`
	// Per stream: udp_bw receiver accounting.
	UDP []UDPCount `json:"udp,omitempty"`
	// Per stream: TCP_INFO total retransmits of the server's socket.
	Retransmits []int64 `json:"retransmits,omitempty"`
	// Kernel UDP counter deltas in the server's network namespace.
	KernelRcvbufErrors *int64 `json:"kernel_rcvbuf_errors,omitempty"`
	KernelInErrors     *int64 `json:"kernel_in_errors,omitempty"`
	// Missing maps result paths to why the server could not measure them.
	Missing map[string]string `json:"missing,omitempty"`
}

// UDPCount is one udp_bw stream's receiver accounting by sequence number.
type UDPCount struct {
	Received   int64    `json:"received"`
	OutOfOrder int64    `json:"out_of_order"`
	Duplicated int64    `json:"duplicated"`
	JitterNs   *float64 `json:"jitter_ns"`
	// CountOnly: the datagrams were too short for sequence numbers, so
	// OutOfOrder and Duplicated were not measured.
	CountOnly bool `json:"count_only,omitempty"`
}

// writeMsg sends one length-prefixed JSON frame.
func writeMsg(w io.Writer, m *Msg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > maxFrame {
		return fmt.Errorf("control message %s too large (%d bytes)", m.Type, len(b))
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

// readMsg reads one frame. want, if not empty, is the only acceptable type
// besides "error", whose text becomes the returned error.
func readMsg(r io.Reader, want string) (*Msg, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n == 0 || n > maxFrame {
		return nil, fmt.Errorf("bad control frame length %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	var m Msg
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("bad control message: %w", err)
	}
	if m.Type == msgError {
		return nil, &PeerError{Msg: m.Error, Code: m.Code}
	}
	if want != "" && m.Type != want {
		return nil, fmt.Errorf("protocol error: got %q message, want %q", m.Type, want)
	}
	return &m, nil
}

// PeerError is an error the other side reported over the control connection.
type PeerError struct{ Msg, Code string }

func (e *PeerError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrAuth) and errors.Is(err, ErrBusy) true for the
// server's refusals.
func (e *PeerError) Is(target error) bool {
	return (target == ErrAuth && e.Code == codeAuth) || (target == ErrBusy && e.Code == codeBusy)
}

// VersionError says the two sides speak different protocol versions.
type VersionError struct {
	Client, Server               int
	ClientVersion, ServerVersion string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("protocol version mismatch: client speaks v%d (cnibench %s), server v%d (cnibench %s); run the same cnibench release on both sides",
		e.Client, e.ClientVersion, e.Server, e.ServerVersion)
}
