package sockperf

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/result"
)

// Report is what sockperf ping-pong prints for one server, in its own units.
type Report struct {
	WarmupMs       float64
	ValidSeconds   float64
	ValidSent      int64
	ValidReceived  int64
	FullRTT        bool    // avg-rtt (--full-rtt) rather than avg-latency (RTT/2)
	Avg, StdDev    float64 // in Unit
	Unit           string  // from the Summary line, e.g. "usec"
	Dropped        int64
	Duplicated     int64
	OutOfOrder     int64
	Observations   int64
	Min, Max       float64
	Percentiles    map[float64]float64 // percentile → value, in Unit
	haveAvg, haveN bool
	haveMin        bool
	haveMax        bool
	haveValid      bool
	haveCounts     bool
}

var (
	totalRunRE = regexp.MustCompile(`^\[Total Run\] RunTime=([0-9.]+) sec; Warm up time=([0-9]+) msec; SentMessages=([0-9]+); ReceivedMessages=([0-9]+)$`)
	validRE    = regexp.MustCompile(`^\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=([0-9]+); ReceivedMessages=([0-9]+)$`)
	avgRE      = regexp.MustCompile(`^====> avg-(rtt|latency)=([0-9.]+) \(std-dev=([0-9.]+)\)`)
	countsRE   = regexp.MustCompile(`^# dropped messages = ([0-9]+); # duplicated messages = ([0-9]+); # out-of-order messages = ([0-9]+)$`)
	summaryRE  = regexp.MustCompile(`^Summary: (?:Latency|Round trip) is ([0-9.]+) (\w+)$`)
	totalObsRE = regexp.MustCompile(`^Total ([0-9]+) observations`)
	maxRE      = regexp.MustCompile(`^---> <MAX> observation =\s*([0-9.]+)$`)
	minRE      = regexp.MustCompile(`^---> <MIN> observation =\s*([0-9.]+)$`)
	pctRE      = regexp.MustCompile(`^---> percentile ([0-9.]+) =\s*([0-9.]+)$`)
)

// unitNs scales sockperf's time unit to nanoseconds.
var unitNs = map[string]float64{"nsec": 1, "usec": 1e3, "msec": 1e6, "sec": 1e9}

// ParseReport reads sockperf ping-pong output. Colour escapes and the
// "sockperf: " prefix are removed first. sockperf exits 0 even when it
// fails, so its ERROR lines and "No messages were received" become errors.
func ParseReport(out []byte) (*Report, error) {
	rep := &Report{Percentiles: map[float64]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(driver.StripANSI(out)))
	servers := 0
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "sockperf:"))
		var m []string
		match := func(re *regexp.Regexp) bool { m = re.FindStringSubmatch(line); return m != nil }
		switch {
		case strings.HasPrefix(line, "ERROR"), strings.Contains(line, "Invalid"):
			return nil, fmt.Errorf("sockperf: %s", line)
		case strings.HasPrefix(line, "No messages were received"):
			return nil, fmt.Errorf("sockperf: %s", line)
		case strings.HasPrefix(line, "========= Printing statistics for Server No:"):
			servers++
			if servers > 1 {
				return nil, fmt.Errorf("sockperf printed statistics for more than one server; cnibench runs one")
			}
		case match(totalRunRE):
			rep.WarmupMs = mustF(m[2])
		case match(validRE):
			rep.ValidSeconds, rep.ValidSent, rep.ValidReceived = mustF(m[1]), mustI(m[2]), mustI(m[3])
			rep.haveValid = true
		case match(avgRE):
			rep.FullRTT = m[1] == "rtt"
			rep.Avg, rep.StdDev, rep.haveAvg = mustF(m[2]), mustF(m[3]), true
		case match(countsRE):
			rep.Dropped, rep.Duplicated, rep.OutOfOrder, rep.haveCounts = mustI(m[1]), mustI(m[2]), mustI(m[3]), true
		case match(summaryRE):
			rep.Unit = m[2]
		case match(totalObsRE):
			rep.Observations, rep.haveN = mustI(m[1]), true
		case match(maxRE):
			rep.Max, rep.haveMax = mustF(m[1]), true
		case match(minRE):
			rep.Min, rep.haveMin = mustF(m[1]), true
		case match(pctRE):
			rep.Percentiles[mustF(m[1])] = mustF(m[2])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read sockperf output: %w", err)
	}
	switch {
	case !rep.haveAvg:
		return nil, fmt.Errorf("sockperf output has no avg-rtt/avg-latency line (did the test run?)")
	case rep.Unit == "":
		return nil, fmt.Errorf("sockperf output has no Summary line naming the unit")
	case !rep.haveValid:
		return nil, fmt.Errorf("sockperf output has no [Valid Duration] line")
	case !rep.haveN || !rep.haveMin || !rep.haveMax:
		return nil, fmt.Errorf("sockperf output lacks the observation count or MIN/MAX lines")
	}
	if _, ok := unitNs[rep.Unit]; !ok {
		return nil, fmt.Errorf("sockperf reported latency in unknown unit %q", rep.Unit)
	}
	// A malformed number ("3.7.421") parsed as NaN or -1 above: refuse the
	// report rather than store it.
	nums := map[string]float64{"avg": rep.Avg, "std-dev": rep.StdDev, "valid duration": rep.ValidSeconds,
		"MIN": rep.Min, "MAX": rep.Max, "warm up time": rep.WarmupMs}
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }
	for name, v := range nums {
		if bad(v) {
			return nil, fmt.Errorf("sockperf output has a malformed %s value", name)
		}
	}
	for p, v := range rep.Percentiles {
		if bad(p) || bad(v) {
			return nil, fmt.Errorf("sockperf output has a malformed percentile line")
		}
	}
	if rep.ValidSent < 0 || rep.ValidReceived < 0 || rep.Observations < 0 || (rep.haveCounts && (rep.Dropped < 0 || rep.Duplicated < 0 || rep.OutOfOrder < 0)) {
		return nil, fmt.Errorf("sockperf output has a malformed count")
	}
	return rep, nil
}

// The regular expressions only admit digits and dots, so these conversions
// fail only on a malformed number such as "1.2.3"; NaN then poisons the
// value and Parse rejects it instead of storing a 0.
func mustF(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nan
	}
	return v
}

func mustI(s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return v
}

var nan = func() float64 { z := 0.0; return z / z }()

// Parse implements driver.Driver.
func (d toolDriver) Parse(spec driver.Spec, stdout []byte) (*result.Result, error) {
	rep, err := ParseReport(stdout)
	if err != nil {
		return nil, err
	}
	// Everything into RTT nanoseconds.
	k := unitNs[rep.Unit]
	if !rep.FullRTT {
		k *= 2
	}
	vals := []float64{rep.Avg, rep.StdDev, rep.Min, rep.Max, rep.ValidSeconds}
	for p, v := range rep.Percentiles {
		vals = append(vals, p, v)
	}
	for _, v := range vals {
		if v != v { // NaN from mustF
			return nil, fmt.Errorf("sockperf output has a malformed number")
		}
	}
	if rep.ValidSent < 0 || rep.ValidReceived < 0 || rep.Observations < 0 {
		return nil, fmt.Errorf("sockperf output has a malformed count")
	}
	if rep.Avg <= 0 || rep.Observations == 0 {
		return nil, fmt.Errorf("sockperf measured no round trips (avg %v, %d observations)", rep.Avg, rep.Observations)
	}

	argv, _ := d.ClientCommand(spec)
	r := result.New(result.Tool{Name: "sockperf", Command: argv}, spec.Test, spec.MsgSize)
	r.Server = fmt.Sprintf("%s:%d", spec.Server, portOr(spec.Port))
	r.DurationSeconds = rep.ValidSeconds
	r.WarmupSeconds = rep.WarmupMs / 1e3

	rtt := result.Dist{Count: rep.Observations,
		Mean: result.F(rep.Avg * k), Stddev: result.F(rep.StdDev * k),
		Min: result.F(rep.Min * k), Max: result.F(rep.Max * k)}
	for _, pv := range []struct {
		p   float64
		dst **float64
	}{{50, &rtt.P50}, {90, &rtt.P90}, {99, &rtt.P99}, {99.9, &rtt.P999}} {
		if v, ok := rep.Percentiles[pv.p]; ok {
			*pv.dst = result.F(v * k)
		} else {
			r.SetMissing(fmt.Sprintf("latency.rtt_ns.%s", pname(pv.p)), "sockperf printed no such percentile")
			r.SetMissing(fmt.Sprintf("latency.one_way_ns.%s", pname(pv.p)), "sockperf printed no such percentile")
		}
	}
	oneWay := rtt.Halved() // sockperf's default view
	lat := &result.Latency{RTTNs: rtt, OneWayNs: oneWay}
	lat.CDF = append(lat.CDF, result.CDFPoint{Percentile: 0, Ns: rep.Min * k})
	ps := make([]float64, 0, len(rep.Percentiles))
	for p := range rep.Percentiles {
		ps = append(ps, p)
	}
	sort.Float64s(ps)
	for _, p := range ps {
		lat.CDF = append(lat.CDF, result.CDFPoint{Percentile: p, Ns: rep.Percentiles[p] * k})
	}
	lat.CDF = append(lat.CDF, result.CDFPoint{Percentile: 100, Ns: rep.Max * k})
	r.Latency = lat

	r.Transactions = &result.Transactions{Count: rep.ValidReceived}
	if rep.ValidSeconds > 0 {
		r.Transactions.PerSec = float64(rep.ValidReceived) / rep.ValidSeconds
	}
	if spec.Test == result.UDPLat {
		if rep.haveCounts {
			u := &result.UDP{Sent: rep.ValidSent, Received: rep.ValidReceived, Lost: rep.Dropped,
				Duplicated: result.I(rep.Duplicated), OutOfOrder: result.I(rep.OutOfOrder)}
			if rep.ValidSent > 0 {
				u.LossPct = 100 * float64(rep.Dropped) / float64(rep.ValidSent)
			}
			r.UDP = u
			r.SetMissing("udp.jitter_ns", "sockperf ping-pong reports percentiles, not jitter")
			r.SetMissing("udp.kernel_rcvbuf_errors", "not collected for engine sockperf")
			r.SetMissing("udp.kernel_in_errors", "not collected for engine sockperf")
		} else {
			r.SetMissing("udp", "sockperf printed no dropped/duplicated/out-of-order line")
		}
	}
	r.SetMissing("cpu", "sockperf does not report CPU")
	return r, nil
}

func pname(p float64) string {
	if p == 99.9 {
		return "p99_9"
	}
	return "p" + strconv.FormatFloat(p, 'f', -1, 64)
}

func portOr(p int) int {
	if p == 0 {
		return DefaultPort
	}
	return p
}
