package engine

import "encoding/binary"

// udp_bw datagrams start with a 16-byte header, big-endian:
//
//	seq(uint64, top bit set = measured interval)  send_ns(int64, sender's monotonic clock)
//
// Sequence numbers restart at 0 when the measured interval starts, so the
// receiver counts exactly the datagrams the sender counted as sent. Big-endian
// keeps the first byte 0x00 or 0x80, never the 'C' of a UDP hello.
const (
	udpHdrMin   = 8  // sequence number only
	udpHdrTS    = 16 // sequence number and send time (needed for jitter)
	measuredBit = uint64(1) << 63
)

// Datagrams shorter than udpHdrMin (the 1-byte udp_bw of the qperf tables)
// carry only the sequence number's top byte: 0x80 marks the measured
// interval, 0x00 the warmup. The receiver can then only count them
// (loss = sent - received); order and duplicates are not knowable.

func putUDPHdr(b []byte, seq uint64, sendNs int64) {
	if len(b) < udpHdrMin {
		b[0] = byte(seq >> 56)
		return
	}
	binary.BigEndian.PutUint64(b, seq)
	if len(b) >= udpHdrTS {
		binary.BigEndian.PutUint64(b[8:], uint64(sendNs))
	}
}

// udpKind is what a received udp_bw datagram is to the receiver.
type udpKind uint8

const (
	udpIgnored       udpKind = iota // empty, a retried hello, warmup, or too short to read
	udpShortMeasured                // shorter than a sequence number, sent in the measured interval
	udpMeasured                     // sequence number (and maybe a send time) in the measured interval
)

// readUDPHdr reads what putUDPHdr wrote: the sequence number without its
// measured bit, and the send time when the datagram is long enough to carry
// one (else 0). countOnly is the stream's mode: datagrams shorter than a
// sequence number only count.
func readUDPHdr(p []byte, countOnly bool) (kind udpKind, seq uint64, sendNs int64) {
	if len(p) == 0 || p[0] == 'C' { // 'C': a retried hello ("CNBU…")
		return udpIgnored, 0, 0
	}
	if len(p) < udpHdrMin {
		if countOnly && p[0]&0x80 != 0 {
			return udpShortMeasured, 0, 0
		}
		return udpIgnored, 0, 0
	}
	seq = binary.BigEndian.Uint64(p)
	if seq&measuredBit == 0 {
		return udpIgnored, 0, 0 // warmup
	}
	if len(p) >= udpHdrTS {
		sendNs = int64(binary.BigEndian.Uint64(p[8:]))
	}
	return udpMeasured, seq &^ measuredBit, sendNs
}

// seqWindow is how far back (in datagrams) the receiver remembers which
// sequence numbers it has seen, to tell a late datagram from a duplicate.
const seqWindow = 1 << 20

// seqTracker is the udp_bw receiver's accounting by sequence number. The
// sender reports how many it sent; lost = sent - received.
type seqTracker struct {
	seen                     []uint64 // ring bitmap of seqWindow bits
	started                  bool
	max                      uint64
	received, ooo, dup, late int64
	// RFC 3550 interarrival jitter, in ns.
	jitter      float64
	lastTransit int64
	haveTransit bool
	withTS      bool
	// countOnly: datagrams too short for a sequence number are only counted.
	countOnly bool
}

func newSeqTracker(withTS, countOnly bool) *seqTracker {
	if countOnly {
		return &seqTracker{countOnly: true}
	}
	return &seqTracker{seen: make([]uint64, seqWindow/64), withTS: withTS}
}

func (t *seqTracker) bit(seq uint64) (word *uint64, mask uint64) {
	i := seq % seqWindow
	return &t.seen[i/64], 1 << (i % 64)
}

// add accounts one measured datagram (seq without the measured bit), sent at
// sendNs on the sender's clock and read at arriveNs on ours.
func (t *seqTracker) add(seq uint64, sendNs, arriveNs int64) {
	switch {
	case !t.started || seq > t.max:
		if t.started {
			// Forget what the window slides past.
			if seq-t.max >= seqWindow {
				clear(t.seen)
			} else {
				for s := t.max + 1; s < seq; s++ {
					w, m := t.bit(s)
					*w &^= m
				}
			}
		}
		w, m := t.bit(seq)
		*w |= m
		t.started, t.max = true, seq
		t.received++
	case t.max-seq >= seqWindow:
		// Too old to know whether we saw it: count it as received out of
		// order; a duplicate this late would be counted twice.
		t.received++
		t.ooo++
		t.late++
	default:
		w, m := t.bit(seq)
		if *w&m != 0 {
			t.dup++
			return
		}
		*w |= m
		t.received++
		t.ooo++
	}
	if t.withTS {
		transit := arriveNs - sendNs
		if t.haveTransit {
			d := float64(transit - t.lastTransit)
			if d < 0 {
				d = -d
			}
			t.jitter += (d - t.jitter) / 16
		}
		t.lastTransit, t.haveTransit = transit, true
	}
}

func (t *seqTracker) count() UDPCount {
	c := UDPCount{Received: t.received, OutOfOrder: t.ooo, Duplicated: t.dup, CountOnly: t.countOnly}
	if t.withTS && t.haveTransit {
		j := t.jitter
		c.JitterNs = &j
	}
	return c
}
