package qperf

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/result"
)

// Field is one "name = value unit" line of qperf's output.
type Field struct {
	Raw   string  // the text after "=", trimmed
	Value float64 // the number, commas removed
	Unit  string  // what follows the number, e.g. "us", "Mb/sec", "% cpus"
}

// Block is one test's section of qperf's output ("tcp_lat:" and its lines).
type Block struct {
	Test   string
	Fields map[string]Field
}

var (
	headerRE = regexp.MustCompile(`^([a-z0-9_]+):$`)
	fieldRE  = regexp.MustCompile(`^\s+([a-z0-9_]+)\s+=\s+(.*)$`)
	numRE    = regexp.MustCompile(`^(-?[0-9][0-9,]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*(.*)$`)
	// "4 KiB (4,096)": qperf gives the exact byte count in parentheses.
	exactRE = regexp.MustCompile(`\(([0-9][0-9,]*)\)\s*$`)
)

// ParseBlocks splits qperf's output into per-test blocks. Any line that is
// neither a test header nor a "name = value" line is an error: qperf prints
// its failures to stderr, so an unknown line on stdout means the output is
// not what this parser understands, and guessing would risk a wrong number.
func ParseBlocks(out []byte) ([]Block, error) {
	var blocks []Block
	sc := bufio.NewScanner(bytes.NewReader(out))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), " \t\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if m := headerRE.FindStringSubmatch(line); m != nil {
			blocks = append(blocks, Block{Test: m[1], Fields: map[string]Field{}})
			continue
		}
		m := fieldRE.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("qperf output line %d: unexpected %q", n, line)
		}
		if len(blocks) == 0 {
			return nil, fmt.Errorf("qperf output line %d: %q before any test header", n, line)
		}
		f, err := parseField(m[2])
		if err != nil {
			return nil, fmt.Errorf("qperf output line %d (%s): %w", n, m[1], err)
		}
		blocks[len(blocks)-1].Fields[m[1]] = f
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read qperf output: %w", err)
	}
	return blocks, nil
}

func parseField(raw string) (Field, error) {
	raw = strings.TrimSpace(raw)
	m := numRE.FindStringSubmatch(raw)
	if m == nil {
		return Field{}, fmt.Errorf("value %q does not start with a number", raw)
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	if err != nil {
		return Field{}, fmt.Errorf("value %q: %w", raw, err)
	}
	unit := strings.TrimSpace(m[2])
	if e := exactRE.FindStringSubmatch(unit); e != nil {
		exact, err := strconv.ParseFloat(strings.ReplaceAll(e[1], ",", ""), 64)
		if err != nil {
			return Field{}, fmt.Errorf("value %q: %w", raw, err)
		}
		// The parenthesised figure is already in bytes.
		return Field{Raw: raw, Value: exact, Unit: "bytes"}, nil
	}
	return Field{Raw: raw, Value: v, Unit: unit}, nil
}

// Unit scales (qperf uses decimal prefixes for rates and sizes it measured,
// and binary KiB/MiB/GiB for sizes it was given).
var (
	timeNs = map[string]float64{"ns": 1, "us": 1e3, "ms": 1e6, "sec": 1e9}
	bwBps  = map[string]float64{
		"bits/sec": 1, "Kb/sec": 1e3, "Mb/sec": 1e6, "Gb/sec": 1e9, "Tb/sec": 1e12,
		"bytes/sec": 8, "KB/sec": 8e3, "MB/sec": 8e6, "GB/sec": 8e9, "TB/sec": 8e12,
	}
	rateHz    = map[string]float64{"/sec": 1, "K/sec": 1e3, "M/sec": 1e6, "G/sec": 1e9}
	sizeBytes = map[string]float64{
		"bytes": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
	}
	// qperf prints large counts rounded to three digits: "2.13 million".
	countOne = map[string]float64{"": 1, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
	cpusPct  = map[string]float64{"% cpus": 1}
)

// get converts field name of b with the given unit table. ok is false when
// the field is absent; a present field with an unknown unit is an error.
func get(b Block, name string, units map[string]float64) (v float64, ok bool, err error) {
	f, present := b.Fields[name]
	if !present {
		return 0, false, nil
	}
	k, known := units[f.Unit]
	if !known {
		return 0, false, fmt.Errorf("qperf %s: %s = %q: unknown unit %q", b.Test, name, f.Raw, f.Unit)
	}
	return f.Value * k, true, nil
}

// Parse implements driver.Driver. It returns the block for spec.Test (and,
// when an -oo loop printed several, the one at spec.MsgSize).
func (d toolDriver) Parse(spec driver.Spec, stdout []byte) (*result.Result, error) {
	blocks, err := ParseBlocks(stdout)
	if err != nil {
		return nil, err
	}
	// A run may hold several tests (the seeds' command) and, with an -oo
	// loop, one block per message size of the same test.
	var cands []*Block
	for i := range blocks {
		if blocks[i].Test == spec.Test {
			cands = append(cands, &blocks[i])
		}
	}
	var b *Block
	switch {
	case len(cands) == 1:
		b = cands[0]
	case len(cands) > 1:
		for _, c := range cands {
			if ms, ok, err := get(*c, "msg_size", sizeBytes); err == nil && ok && int(ms) == spec.MsgSize {
				if b != nil {
					return nil, fmt.Errorf("qperf output has more than one %s block at msg_size %d", spec.Test, spec.MsgSize)
				}
				b = c
			}
		}
		if b == nil {
			return nil, fmt.Errorf("qperf output has several %s blocks, none at msg_size %d", spec.Test, spec.MsgSize)
		}
	}
	if b == nil {
		if len(blocks) == 0 {
			return nil, fmt.Errorf("qperf printed no results (is a qperf server running on %s?)", spec.Server)
		}
		return nil, fmt.Errorf("qperf output has no %s block (it has %s)", spec.Test, testNames(blocks))
	}
	return fromBlock(d, spec, *b)
}

func testNames(bs []Block) string {
	n := make([]string, len(bs))
	for i, b := range bs {
		n[i] = b.Test
	}
	return strings.Join(n, ", ")
}

// FromBlock maps one qperf block into a result. Exposed through Parse; kept
// separate so ParseAll can map every block of a multi-test run.
func fromBlock(d toolDriver, spec driver.Spec, b Block) (*result.Result, error) {
	argv, _ := d.ClientCommand(spec) // recorded for the reader; spec was valid to run
	r := result.New(result.Tool{Name: "qperf", Command: argv}, b.Test, spec.MsgSize)
	r.Server = fmt.Sprintf("%s:%d", spec.Server, portOr(spec.Port))
	r.Parallel = 1

	var errs []error
	val := func(name string, units map[string]float64) (float64, bool) {
		v, ok, err := get(b, name, units)
		if err != nil {
			errs = append(errs, err)
		}
		return v, ok
	}
	// cpuSide is one side's host-wide CPU from <prefix>_cpus_used (loc/rem
	// for the latency tests, send/recv for the bandwidth ones).
	cpuSide := func(prefix string) *result.CPUSide {
		if v, ok := val(prefix+"_cpus_used", cpusPct); ok {
			return &result.CPUSide{HostBusyPct: result.F(v)}
		}
		return nil
	}

	if ms, ok := val("msg_size", sizeBytes); ok && int(ms) != spec.MsgSize && spec.MsgSize != 0 {
		errs = append(errs, fmt.Errorf("qperf %s ran with msg_size %v bytes, %d was asked", b.Test, ms, spec.MsgSize))
	} else if ok {
		r.MsgSizeBytes = int(ms)
	}
	secs, okTime := val("time", timeNs)
	if okTime {
		r.DurationSeconds = secs / 1e9
	} else {
		r.DurationSeconds = spec.Duration.Seconds()
	}

	switch b.Test {
	case result.TCPLat, result.UDPLat:
		lat, ok := val("latency", timeNs)
		if !ok {
			errs = append(errs, fmt.Errorf("qperf %s: no latency line", b.Test))
			break
		}
		if lat <= 0 {
			errs = append(errs, fmt.Errorf("qperf %s: latency %v ns is not positive", b.Test, lat))
			break
		}
		r.Latency = &result.Latency{
			OneWayNs: result.Dist{Mean: result.F(lat)},
			RTTNs:    result.Dist{Mean: result.F(2 * lat)},
		}
		for _, p := range []string{"min", "stddev", "p50", "p90", "p99", "p99_9", "max"} {
			r.SetMissing("latency.one_way_ns."+p, "qperf reports only the mean latency")
			r.SetMissing("latency.rtt_ns."+p, "qperf reports only the mean latency")
		}
		// Round trips completed by the client (-vvs). qperf's msg_rate
		// counts messages both ways, two per round trip.
		if n, ok := val("loc_recv_msgs", countOne); ok {
			r.Transactions = &result.Transactions{Count: int64(n)}
			r.Latency.RTTNs.Count, r.Latency.OneWayNs.Count = int64(n), int64(n)
			if r.DurationSeconds > 0 {
				r.Transactions.PerSec = n / r.DurationSeconds
			}
		} else if rate, ok := val("msg_rate", rateHz); ok {
			r.Transactions = &result.Transactions{PerSec: rate / 2}
			r.SetMissing("transactions.count", "qperf printed no loc_recv_msgs (run with -vvs)")
		} else {
			r.SetMissing("transactions", "qperf printed neither loc_recv_msgs nor msg_rate")
		}
		setCPU(r, cpuSide("loc"), cpuSide("rem"))

	case result.TCPBW, result.UDPBW:
		tp := &result.Throughput{}
		r.Throughput = tp
		if b.Test == result.TCPBW {
			bw, ok := val("bw", bwBps)
			if !ok {
				errs = append(errs, fmt.Errorf("qperf tcp_bw: no bw line"))
				break
			}
			if bw == 0 {
				errs = append(errs, fmt.Errorf("qperf tcp_bw moved nothing (bw = %s)", b.Fields["bw"].Raw))
				break
			}
			tp.ReceiverBps = result.F(bw)
			r.SetMissing("throughput.sender_bps", "qperf tcp_bw prints one figure, bw, stored as receiver_bps")
		} else {
			s, okS := val("send_bw", bwBps)
			rv, okR := val("recv_bw", bwBps)
			if !okS || !okR {
				errs = append(errs, fmt.Errorf("qperf udp_bw: need send_bw and recv_bw lines"))
				break
			}
			if s == 0 {
				// qperf prints 0 when every send failed (e.g. a datagram
				// larger than UDP allows): nothing was measured.
				errs = append(errs, fmt.Errorf("qperf udp_bw sent nothing (send_bw = %s); the message size may exceed what UDP can carry", b.Fields["send_bw"].Raw))
				break
			}
			tp.SenderBps, tp.ReceiverBps = result.F(s), result.F(rv)
		}
		// Counts from -vvs: the client is the sender (qperf without -f).
		if v, ok := val("send_bytes", sizeBytes); ok {
			tp.BytesSent = result.I(int64(v))
		} else {
			r.SetMissing("throughput.bytes_sent", "qperf printed no send_bytes (run with -vvs)")
		}
		if v, ok := val("recv_bytes", sizeBytes); ok {
			tp.BytesReceived = result.I(int64(v))
		} else {
			r.SetMissing("throughput.bytes_received", "qperf printed no recv_bytes (run with -vvs)")
		}
		sent, okS := val("send_msgs", countOne)
		recv, okR := val("recv_msgs", countOne)
		if okS && r.DurationSeconds > 0 {
			tp.SenderPps = result.F(sent / r.DurationSeconds)
		} else {
			r.SetMissing("throughput.sender_pps", "qperf printed no send_msgs (run with -vvs)")
		}
		if okR && r.DurationSeconds > 0 {
			tp.ReceiverPps = result.F(recv / r.DurationSeconds)
		} else {
			r.SetMissing("throughput.receiver_pps", "qperf printed no recv_msgs (run with -vvs)")
		}
		if b.Test == result.UDPBW {
			if okS && okR && (b.Fields["send_msgs"].Unit != "" || b.Fields["recv_msgs"].Unit != "") {
				// sent - recv of two numbers rounded to three digits is noise,
				// not a loss count.
				r.SetMissing("udp", fmt.Sprintf("qperf printed rounded counts (send_msgs %q, recv_msgs %q); loss cannot be derived from them",
					b.Fields["send_msgs"].Raw, b.Fields["recv_msgs"].Raw))
			} else if okS && okR {
				u := &result.UDP{Sent: int64(sent), Received: int64(recv), Lost: int64(sent - recv)}
				if sent > 0 {
					u.LossPct = 100 * (sent - recv) / sent
				}
				r.UDP = u
				r.SetMissing("udp.out_of_order", "qperf does not count out-of-order datagrams")
				r.SetMissing("udp.duplicated", "qperf does not count duplicated datagrams")
				r.SetMissing("udp.jitter_ns", "qperf does not measure jitter")
				r.SetMissing("udp.kernel_rcvbuf_errors", "not collected for engine qperf")
				r.SetMissing("udp.kernel_in_errors", "not collected for engine qperf")
			} else {
				r.SetMissing("udp", "qperf printed no send_msgs/recv_msgs (run with -vvs)")
			}
		}
		setCPU(r, cpuSide("send"), cpuSide("recv"))
	}
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return r, nil
}

// setCPU stores qperf's host-wide CPU figures. qperf reads /proc/stat, so
// the process-level fields stay null: Measure fills the client's from the
// process's rusage.
func setCPU(r *result.Result, client, server *result.CPUSide) {
	if client == nil && server == nil {
		r.SetMissing("cpu", "qperf printed no cpus_used lines (run with -vt)")
		return
	}
	r.CPU = &result.CPU{Client: client, Server: server}
	for side, c := range map[string]*result.CPUSide{"client": client, "server": server} {
		if c == nil {
			r.SetMissing("cpu."+side, "qperf printed no cpus_used for this side")
			continue
		}
		r.SetMissing("cpu."+side+".process_seconds", "qperf reports host-wide CPU (host_busy_pct), not its process's")
	}
}

func portOr(p int) int {
	if p == 0 {
		return DefaultPort
	}
	return p
}
