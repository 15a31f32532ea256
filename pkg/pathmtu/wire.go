package pathmtu

import (
	"encoding/binary"
)

// The probe on the wire: one UDP datagram padded to the size being tried,
//
//	magic (8) | id (4) | size tried (4) | zeros …
//
// and its answer, whatever the probe's size:
//
//	magic (8) | id (4) | bytes received (4)
//
// The answer is small on purpose: the probe measures the path from the
// client to the server, and a small answer crosses the way back whatever
// that direction carries. It is never larger than the probe, so a server
// answering it cannot be used to amplify traffic, and it says nothing but
// how much arrived. Both the lab's responder and `cnibench server` (its
// UDP port) answer with Answer.

// magic opens every probe and answer.
const magic = "cnbPMTU\x01"

// headerLen is a probe's fixed part, and the whole of an answer.
const headerLen = len(magic) + 8

// ipUDPHeaders is what an IPv4 packet adds to a UDP payload: a 20-byte IP
// header (probes carry no options) and an 8-byte UDP header.
const ipUDPHeaders = 28

// minSize is the smallest packet a probe fits in.
const minSize = ipUDPHeaders + headerLen

// encodeProbe fills b (the whole payload) as probe id of size bytes.
func encodeProbe(b []byte, id uint32, size int) {
	copy(b, magic)
	binary.BigEndian.PutUint32(b[len(magic):], id)
	binary.BigEndian.PutUint32(b[len(magic)+4:], uint32(size))
	clear(b[headerLen:])
}

// probeID reads the id of a probe whose first bytes are b (an ICMP error
// quotes the start of the datagram it is about).
func probeID(b []byte) (uint32, bool) {
	if len(b) < headerLen || string(b[:len(magic)]) != magic {
		return 0, false
	}
	return binary.BigEndian.Uint32(b[len(magic):]), true
}

// Answer returns the answer to a datagram whose first bytes are got and
// whose real length was n (a reader's buffer may hold only its start:
// recvfrom with MSG_TRUNC gives the length); ok is false for anything
// that is not a probe.
func Answer(got []byte, n int) (answer []byte, ok bool) {
	id, ok := probeID(got)
	if !ok {
		return nil, false
	}
	a := make([]byte, headerLen)
	copy(a, magic)
	binary.BigEndian.PutUint32(a[len(magic):], id)
	binary.BigEndian.PutUint32(a[len(magic)+4:], uint32(n))
	return a, true
}

// parseAnswer reads an answer: the probe's id and how many bytes arrived.
func parseAnswer(b []byte) (id uint32, received int, ok bool) {
	if len(b) != headerLen {
		return 0, 0, false
	}
	id, ok = probeID(b)
	return id, int(binary.BigEndian.Uint32(b[len(magic)+4:])), ok
}
