package engine

import (
	"fmt"

	"github.com/cnibench/cnibench/pkg/result"
)

// assemble fills r from the client's streams and the server's report. Every
// field the test cannot produce is left nil with a reason.
func assemble(r *result.Result, o *ClientOptions, streams []*stream, rep *Report, a, b cpuSnap, wall float64) {
	for k, v := range rep.Missing {
		r.SetMissing(k, v)
	}
	var txns, sentBytes, recvBytes, sent, lost, late int64
	hist := newLatHist()
	for i, s := range streams {
		txns += s.txns
		sentBytes += s.bytes
		sent += s.sent
		lost += s.lost
		late += s.late
		hist.merge(s.hist)
		st := result.Stream{ID: i}
		switch o.Test {
		case result.TCPLat, result.UDPLat, result.TCPCRR:
			st.Transactions = &result.Transactions{Count: s.txns, PerSec: float64(s.txns) / wall}
		}
		if rep.Retransmits != nil && i < len(rep.Retransmits) {
			st.Retransmits = result.I(s.retrans[1] - s.retrans[0] + rep.Retransmits[i])
		}
		if o.Test == result.TCPBW || o.Test == result.UDPBW {
			var rb int64
			if i < len(rep.BytesReceived) {
				rb = rep.BytesReceived[i]
			}
			recvBytes += rb
			st.Throughput = throughput(o, s.bytes, rb, wall, rep.Seconds)
		}
		if o.Test == result.UDPBW && i < len(rep.UDP) {
			st.UDP = udpBW(s.sent, rep.UDP[i])
		}
		r.Streams = append(r.Streams, st)
	}
	if len(streams) == 1 {
		r.Streams = nil // the top level says it all
	}

	switch o.Test {
	case result.TCPLat, result.UDPLat, result.TCPCRR:
		r.Transactions = &result.Transactions{Count: txns, PerSec: float64(txns) / wall}
		r.Latency = hist.latency()
		if r.Latency == nil {
			r.SetMissing("latency", "no transaction completed in the measured interval")
		}
	}
	switch o.Test {
	case result.TCPBW, result.UDPBW:
		r.Throughput = throughput(o, sentBytes, recvBytes, wall, rep.Seconds)
		if o.Test == result.TCPBW {
			r.SetMissing("throughput.sender_pps", "TCP is a byte stream; segments are not counted")
			r.SetMissing("throughput.receiver_pps", "TCP is a byte stream; segments are not counted")
		}
		if r.Throughput.ReceiverBps == nil {
			r.SetMissing("throughput.receiver_bps", "server reported no measured interval")
		}
	}
	switch o.Test {
	case result.UDPLat:
		u := &result.UDP{Sent: sent, Received: txns, Lost: lost, OutOfOrder: result.I(late)}
		r.SetMissing("udp.duplicated", "udp_lat waits for one reply at a time; a reply to an earlier request counts as out of order")
		if sent > 0 {
			u.LossPct = 100 * float64(lost) / float64(sent)
		}
		r.SetMissing("udp.jitter_ns", "udp_lat measures round trips; jitter is a udp_bw figure")
		r.UDP = u
	case result.UDPBW:
		var tot UDPCount
		var jit float64
		var nj int
		for _, c := range rep.UDP {
			tot.Received += c.Received
			tot.OutOfOrder += c.OutOfOrder
			tot.Duplicated += c.Duplicated
			tot.CountOnly = tot.CountOnly || c.CountOnly
			if c.JitterNs != nil {
				jit += *c.JitterNs
				nj++
			}
		}
		if nj > 0 {
			tot.JitterNs = result.F(jit / float64(nj)) // mean of the streams' jitter
		}
		r.UDP = udpBW(sent, tot)
		if tot.CountOnly {
			why := fmt.Sprintf("a %d-byte datagram has no room for a sequence number (%d bytes needed); datagrams were only counted, loss = sent - received", o.MsgSize, udpHdrMin)
			r.SetMissing("udp.out_of_order", why)
			r.SetMissing("udp.duplicated", why)
		}
		if r.UDP.JitterNs == nil {
			r.SetMissing("udp.jitter_ns", "needs --msg-size ≥ 16 to carry a send timestamp")
		}
	}
	if o.Test == result.UDPLat || o.Test == result.UDPBW {
		r.UDP.KernelRcvbufErrors, r.UDP.KernelInErrors = rep.KernelRcvbufErrors, rep.KernelInErrors
	}
	switch o.Test {
	case result.TCPLat, result.TCPBW:
		if rep.Retransmits != nil {
			var t int64
			for i, s := range streams {
				t += s.retrans[1] - s.retrans[0]
				if i < len(rep.Retransmits) {
					t += rep.Retransmits[i]
				}
			}
			r.TCP = &result.TCP{Retransmits: result.I(t)}
		} else {
			r.TCP = &result.TCP{}
			r.SetMissing("tcp.retransmits", "server did not report TCP_INFO")
		}
	case result.TCPCRR:
		r.TCP = &result.TCP{}
		r.SetMissing("tcp.retransmits", "tcp_crr opens a connection per transaction; TCP_INFO is per connection")
	}

	// CPU: the client's own side, and the server's as reported. Cost per
	// transaction uses the client's count on both sides.
	miss := map[string]string{}
	var moved int64
	if o.Test == result.TCPBW || o.Test == result.UDPBW {
		moved = sentBytes
	}
	r.CPU = &result.CPU{Client: cpuSide(a, b, txns, moved, miss), Server: rep.CPU}
	for k, v := range miss {
		r.SetMissing("cpu.client."+k, v)
	}
	if rep.CPU == nil {
		r.SetMissing("cpu.server", "server did not report CPU")
	} else if rep.CPU.ProcessSeconds != nil {
		if txns > 0 {
			rep.CPU.UsPerTransaction = result.F(*rep.CPU.ProcessSeconds * 1e6 / float64(txns))
		} else {
			r.SetMissing("cpu.server.us_per_transaction", "no transactions in this test")
		}
	}
}

func throughput(o *ClientOptions, sent, recv int64, wall, srvSeconds float64) *result.Throughput {
	t := &result.Throughput{BytesSent: result.I(sent), BytesReceived: result.I(recv)}
	t.SenderBps = result.F(float64(sent) * 8 / wall)
	if srvSeconds > 0 {
		t.ReceiverBps = result.F(float64(recv) * 8 / srvSeconds)
	}
	if o.Test == result.UDPBW {
		t.SenderPps = result.F(float64(sent) / float64(o.MsgSize) / wall)
		if srvSeconds > 0 {
			t.ReceiverPps = result.F(float64(recv) / float64(o.MsgSize) / srvSeconds)
		}
	}
	return t
}

func udpBW(sent int64, c UDPCount) *result.UDP {
	u := &result.UDP{Sent: sent, Received: c.Received, Lost: sent - c.Received, JitterNs: c.JitterNs}
	if !c.CountOnly {
		u.OutOfOrder, u.Duplicated = result.I(c.OutOfOrder), result.I(c.Duplicated)
	}
	if sent > 0 {
		u.LossPct = 100 * float64(u.Lost) / float64(sent)
	}
	return u
}
