package iperf3

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/result"
)

// Output is the part of iperf3's -J document cnibench reads. Optional
// figures are pointers so a missing key is told apart from a zero.
type Output struct {
	Start            Start   `json:"start"`
	End              End     `json:"end"`
	Error            string  `json:"error"`
	ServerOutputJSON *Output `json:"server_output_json"`
	ServerOutputText *string `json:"server_output_text"`
}

// Start is iperf3's "start" object.
type Start struct {
	Version   string `json:"version"`
	Timestamp struct {
		TimeSecs int64 `json:"timesecs"`
	} `json:"timestamp"`
	ConnectingTo struct {
		Host string `json:"host"`
		Port int    `json:"port"`
	} `json:"connecting_to"`
	TestStart struct {
		Protocol   string `json:"protocol"`
		NumStreams int    `json:"num_streams"`
		BlkSize    int    `json:"blksize"`
		Omit       int    `json:"omit"`
		Duration   int    `json:"duration"`
		Reverse    int    `json:"reverse"`
	} `json:"test_start"`
}

// End is iperf3's "end" object.
type End struct {
	Streams     []EndStream `json:"streams"`
	Sum         *Sum        `json:"sum"` // UDP; in iperf3 < 3.9 the only UDP total
	SumSent     *Sum        `json:"sum_sent"`
	SumReceived *Sum        `json:"sum_received"`
	CPU         *CPUUtil    `json:"cpu_utilization_percent"`
}

// EndStream is one stream's totals: TCP has sender/receiver, UDP has udp.
type EndStream struct {
	Sender   *Sum `json:"sender"`
	Receiver *Sum `json:"receiver"`
	UDP      *Sum `json:"udp"`
}

// Sum is a totals object (sum_sent, sum_received, a stream's sender, …).
type Sum struct {
	Seconds       float64  `json:"seconds"`
	Bytes         *int64   `json:"bytes"`
	BitsPerSecond *float64 `json:"bits_per_second"`
	Retransmits   *int64   `json:"retransmits"`
	JitterMs      *float64 `json:"jitter_ms"`
	LostPackets   *int64   `json:"lost_packets"`
	Packets       *int64   `json:"packets"`
	LostPercent   *float64 `json:"lost_percent"`
	OutOfOrder    *int64   `json:"out_of_order"`
	Sender        bool     `json:"sender"`
}

// CPUUtil is iperf3's cpu_utilization_percent: each side's own process
// (getrusage) over the test's wall time, 100 = one CPU.
type CPUUtil struct {
	HostTotal    *float64 `json:"host_total"`
	HostUser     *float64 `json:"host_user"`
	HostSystem   *float64 `json:"host_system"`
	RemoteTotal  *float64 `json:"remote_total"`
	RemoteUser   *float64 `json:"remote_user"`
	RemoteSystem *float64 `json:"remote_system"`
}

// Decode parses iperf3's -J output. iperf3 reports its own failures inside
// the document ("error"), sometimes with exit status 0, so an error field is
// always turned into an error here.
func Decode(b []byte) (*Output, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("iperf3 printed nothing (expected -J JSON)")
	}
	var o Output
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("iperf3 output is not its -J JSON: %w", err)
	}
	if o.Error != "" {
		return nil, fmt.Errorf("iperf3: %s", o.Error)
	}
	if o.ServerOutputJSON != nil && o.ServerOutputJSON.Error != "" {
		return nil, fmt.Errorf("iperf3 server: %s", o.ServerOutputJSON.Error)
	}
	return &o, nil
}

// Parse implements driver.Driver.
func (d toolDriver) Parse(spec driver.Spec, stdout []byte) (*result.Result, error) {
	o, err := Decode(stdout)
	if err != nil {
		return nil, err
	}
	proto := o.Start.TestStart.Protocol
	switch {
	case spec.Test == result.TCPBW && proto != "TCP", spec.Test == result.UDPBW && proto != "UDP":
		return nil, fmt.Errorf("iperf3 ran a %q test, %s was asked", proto, spec.Test)
	case spec.Test != result.TCPBW && spec.Test != result.UDPBW:
		return nil, d.Supports(spec.Test)
	}
	if o.Start.TestStart.Reverse != 0 {
		return nil, fmt.Errorf("iperf3 ran in reverse mode (-R); cnibench maps sender/receiver for client→server only")
	}

	argv, _ := d.ClientCommand(spec)
	tool := result.Tool{Name: "iperf3", Command: argv}
	if v, err := versionOf(o.Start.Version); err == nil {
		tool.Version = v
	}
	r := result.New(tool, spec.Test, spec.MsgSize)
	if o.Start.TestStart.BlkSize > 0 {
		r.MsgSizeBytes = o.Start.TestStart.BlkSize
	}
	r.Server = fmt.Sprintf("%s:%d", o.Start.ConnectingTo.Host, o.Start.ConnectingTo.Port)
	r.Parallel = o.Start.TestStart.NumStreams
	r.WarmupSeconds = float64(o.Start.TestStart.Omit)
	if o.Start.Timestamp.TimeSecs > 0 {
		r.Start = time.Unix(o.Start.Timestamp.TimeSecs, 0).UTC()
	}

	if spec.Test == result.TCPBW {
		err = fillTCP(r, o)
	} else {
		err = fillUDP(r, o)
	}
	if err != nil {
		return nil, err
	}
	fillCPU(r, o.End.CPU)
	return r, nil
}

func need(what string, p any) error {
	switch v := p.(type) {
	case *Sum:
		if v == nil {
			return fmt.Errorf("iperf3 JSON has no end.%s", what)
		}
	case *float64:
		if v == nil {
			return fmt.Errorf("iperf3 JSON has no %s", what)
		}
	case *int64:
		if v == nil {
			return fmt.Errorf("iperf3 JSON has no %s", what)
		}
	}
	return nil
}

func fillTCP(r *result.Result, o *Output) error {
	s, rc := o.End.SumSent, o.End.SumReceived
	for _, e := range []error{
		need("sum_sent", s), need("sum_received", rc),
	} {
		if e != nil {
			return e
		}
	}
	for _, e := range []error{
		need("end.sum_sent.bits_per_second", s.BitsPerSecond), need("end.sum_received.bits_per_second", rc.BitsPerSecond),
		need("end.sum_sent.bytes", s.Bytes), need("end.sum_received.bytes", rc.Bytes),
	} {
		if e != nil {
			return e
		}
	}
	if *rc.Bytes == 0 {
		return fmt.Errorf("iperf3 tcp_bw: the receiver got 0 bytes; nothing was measured")
	}
	r.DurationSeconds = s.Seconds
	r.Throughput = &result.Throughput{
		SenderBps: s.BitsPerSecond, ReceiverBps: rc.BitsPerSecond,
		BytesSent: s.Bytes, BytesReceived: rc.Bytes,
	}
	r.SetMissing("throughput.sender_pps", "iperf3 counts TCP bytes, not packets")
	r.SetMissing("throughput.receiver_pps", "iperf3 counts TCP bytes, not packets")
	if s.Retransmits != nil {
		r.TCP = &result.TCP{Retransmits: s.Retransmits}
	} else {
		r.SetMissing("tcp.retransmits", "iperf3 reported no retransmits (not available on this OS)")
	}
	if len(o.End.Streams) > 1 {
		for i, st := range o.End.Streams {
			if st.Sender == nil || st.Receiver == nil {
				return fmt.Errorf("iperf3 JSON: end.streams[%d] lacks sender or receiver", i)
			}
			r.Streams = append(r.Streams, result.Stream{
				ID: i,
				Throughput: &result.Throughput{SenderBps: st.Sender.BitsPerSecond, ReceiverBps: st.Receiver.BitsPerSecond,
					BytesSent: st.Sender.Bytes, BytesReceived: st.Receiver.Bytes},
				Retransmits: st.Sender.Retransmits,
			})
		}
	}
	return nil
}

func fillUDP(r *result.Result, o *Output) error {
	s, rc := o.End.SumSent, o.End.SumReceived
	legacy := false
	if rc == nil {
		// iperf3 before 3.9 has only "sum": the sender's bytes with the
		// receiver's loss and jitter.
		if o.End.Sum == nil {
			return fmt.Errorf("iperf3 JSON has neither end.sum_received nor end.sum")
		}
		s, rc, legacy = o.End.Sum, o.End.Sum, true
	}
	if s == nil {
		return fmt.Errorf("iperf3 JSON has no end.sum_sent")
	}
	for _, e := range []error{
		need("end.sum_sent.bits_per_second", s.BitsPerSecond), need("end.sum_sent.packets", s.Packets),
		need("end.sum_sent.bytes", s.Bytes),
		need("end.sum_received.packets", rc.Packets), need("end.sum_received.lost_packets", rc.LostPackets),
		need("end.sum_received.lost_percent", rc.LostPercent),
	} {
		if e != nil {
			return e
		}
	}
	if *s.Packets == 0 {
		return fmt.Errorf("iperf3 udp_bw sent no datagrams; nothing was measured")
	}
	r.DurationSeconds = s.Seconds
	tp := &result.Throughput{SenderBps: s.BitsPerSecond, BytesSent: s.Bytes}
	if s.Seconds > 0 {
		tp.SenderPps = result.F(float64(*s.Packets) / s.Seconds)
	}
	// iperf3's receiver "packets" is the highest sequence number seen
	// (received + lost); the datagrams that arrived are the difference.
	received := *rc.Packets - *rc.LostPackets
	if legacy {
		r.SetMissing("throughput.receiver_bps", "this iperf3 version reports no receiver totals (no end.sum_received)")
		r.SetMissing("throughput.bytes_received", "this iperf3 version reports no receiver totals (no end.sum_received)")
		r.SetMissing("throughput.receiver_pps", "this iperf3 version reports no receiver totals (no end.sum_received)")
	} else {
		if err := need("end.sum_received.bits_per_second", rc.BitsPerSecond); err != nil {
			return err
		}
		tp.ReceiverBps, tp.BytesReceived = rc.BitsPerSecond, rc.Bytes
		if rc.Seconds > 0 {
			tp.ReceiverPps = result.F(float64(received) / rc.Seconds)
		}
	}
	r.Throughput = tp
	u := &result.UDP{Sent: *s.Packets, Received: received, Lost: *rc.LostPackets, LossPct: *rc.LostPercent}
	if rc.JitterMs != nil {
		u.JitterNs = result.F(*rc.JitterMs * 1e6)
	} else {
		r.SetMissing("udp.jitter_ns", "iperf3 reported no jitter_ms")
	}
	ooo, haveOOO := int64(0), len(o.End.Streams) > 0
	for i, st := range o.End.Streams {
		if st.UDP == nil || st.UDP.OutOfOrder == nil {
			haveOOO = false
			break
		}
		ooo += *st.UDP.OutOfOrder
		if len(o.End.Streams) > 1 {
			su := st.UDP
			stream := result.Stream{ID: i, Throughput: &result.Throughput{SenderBps: su.BitsPerSecond, BytesSent: su.Bytes}}
			if su.Packets != nil && su.LostPackets != nil {
				stream.UDP = &result.UDP{Received: *su.Packets - *su.LostPackets, Lost: *su.LostPackets, OutOfOrder: result.I(*su.OutOfOrder)}
				if su.LostPercent != nil {
					stream.UDP.LossPct = *su.LostPercent
				}
				if su.JitterMs != nil {
					stream.UDP.JitterNs = result.F(*su.JitterMs * 1e6)
				}
			}
			r.Streams = append(r.Streams, stream)
		}
	}
	if haveOOO {
		u.OutOfOrder = result.I(ooo)
	} else {
		r.SetMissing("udp.out_of_order", "iperf3 reported no out_of_order per stream")
	}
	r.SetMissing("udp.duplicated", "iperf3 does not count duplicated datagrams")
	r.SetMissing("udp.kernel_rcvbuf_errors", "not collected for engine iperf3")
	r.SetMissing("udp.kernel_in_errors", "not collected for engine iperf3")
	r.UDP = u
	return nil
}

// fillCPU stores iperf3's per-process CPU: host_* is the client (this side),
// remote_* the server.
func fillCPU(r *result.Result, c *CPUUtil) {
	if c == nil || (c.HostTotal == nil && c.RemoteTotal == nil) {
		r.SetMissing("cpu", "iperf3 reported no cpu_utilization_percent")
		return
	}
	r.CPU = &result.CPU{}
	if c.HostTotal != nil {
		r.CPU.Client = &result.CPUSide{ProcessPct: c.HostTotal}
	} else {
		r.SetMissing("cpu.client", "iperf3 reported no host_total")
	}
	if c.RemoteTotal != nil {
		r.CPU.Server = &result.CPUSide{ProcessPct: c.RemoteTotal}
	} else {
		r.SetMissing("cpu.server", "iperf3 reported no remote_total")
	}
}
