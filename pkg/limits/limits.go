// Package limits holds, once, the bounds and defaults that decide whether a
// test can run as asked: the engine's port, the largest UDP datagram, the
// message-size range the built-in engine accepts. Experiment checks, the
// client's flags, the drivers and the server's session setup all ask here,
// so a size that parses in one place is never refused in another.
package limits

import (
	"fmt"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/units"
)

const (
	// DefaultPort is the one port number `cnibench server` uses for TCP and
	// UDP alike, so one firewall hole or Service port serves every test.
	DefaultPort = 7420

	// MaxUDPPayload is the largest UDP payload over IPv4 (65535 - 20 - 8).
	// Tools asked for larger datagrams fail every send and some (qperf) then
	// report a bandwidth of 0, so such sizes are refused up front.
	MaxUDPPayload = 65507

	// MinMsgSize and MaxMsgSize bound the built-in engine's message size:
	// the server allocates one buffer of this size per stream, so a hostile
	// or mistyped size must not make it allocate without bound.
	MinMsgSize = 1
	MaxMsgSize = 16 << 20

	// MaxParallel bounds the streams of one test (--parallel): the server
	// holds one socket and one buffer per stream. iperf3 has the same bound
	// of its own (-P at most 128).
	MaxParallel = 128
)

// The external tools' own message-size bounds, as their argument parsers
// state them (sockperf 3.7: "'-m' Invalid message size: 13 (min: 14)",
// "(max: 1048575)"; iperf3 3.12: "block size invalid (minimum = 16 bytes,
// maximum = 65507 bytes)" for UDP, "block size too large (maximum = 1048576
// bytes)" for TCP). A size outside them parses as YAML but fails in every
// child, so the drivers refuse it when an experiment is checked.
const (
	SockperfMinMsg = 14 // sockperf's own header
	SockperfMaxMsg = 1<<20 - 1
	Iperf3MinUDP   = 16 // iperf3's UDP header (sequence number and time)
	Iperf3MaxTCP   = 1 << 20
)

// IsUDP reports whether test sends datagrams, so its size is bounded by
// MaxUDPPayload.
func IsUDP(test string) bool { return test == result.UDPLat || test == result.UDPBW }

// CheckSize validates a message size for a test of the built-in engine
// (drivers add their tools' own minimums on top).
func CheckSize(test string, size int) error {
	switch {
	case size < MinMsgSize:
		return fmt.Errorf("message size %d: must be at least %d byte", size, MinMsgSize)
	case IsUDP(test) && size > MaxUDPPayload:
		return fmt.Errorf("message size %d: a UDP datagram carries at most %d bytes", size, MaxUDPPayload)
	case size > MaxMsgSize:
		return fmt.Errorf("message size %d: at most %s", size, units.FormatSize(MaxMsgSize))
	}
	return nil
}
