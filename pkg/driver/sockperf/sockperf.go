// Package sockperf runs sockperf's ping-pong mode behind the driver
// interface: the reference for latency percentiles, which qperf does not
// report.
package sockperf

import (
	"fmt"
	"strings"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/limits"
	"github.com/cnibench/cnibench/pkg/result"
)

// DefaultPort is sockperf's port when -p is not given.
const DefaultPort = 11111

// MinMsgSize is the smallest message sockperf sends: its own header.
const MinMsgSize = limits.SockperfMinMsg

// Driver is the sockperf driver, registered as engine "sockperf": ping-pong
// over TCP or UDP.
var Driver driver.Driver = toolDriver{driver.NewTool("sockperf", DefaultPort, versionOf, result.TCPLat, result.UDPLat).
	Refuse("sockperf has no %s test; use engine builtin", result.TCPCRR).
	Refuse("sockperf is used here for latency only (tcp_lat, udp_lat); for %s use engine iperf3, qperf or builtin", result.TCPBW, result.UDPBW).
	OneStream("sockperf ping-pong runs one connection; for --parallel %d use engine builtin")}

// toolDriver is sockperf as a driver.Tool, with its commands and its parser.
// It holds no state.
type toolDriver struct{ *driver.Tool }

func init() { driver.Register(Driver) }

// versionOf reads sockperf --version ("sockperf, version 3.7-no.git" →
// "3.7-no.git").
func versionOf(out string) (string, error) {
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "version "); i >= 0 && strings.HasPrefix(strings.TrimSpace(l), "sockperf") {
			return strings.TrimSpace(l[i+len("version "):]), nil
		}
	}
	return "", driver.NotInstalled("sockperf --version printed no version line: %q", strings.TrimSpace(out))
}

// ServerCommand implements driver.Driver: `sockperf server [--tcp] -p PORT`.
func (toolDriver) ServerCommand(spec driver.Spec) ([]string, error) {
	argv := []string{"sockperf", "server"}
	if spec.Test == result.TCPLat {
		argv = append(argv, "--tcp")
	}
	argv = driver.WithPort(argv, "-p", spec.Port)
	return argv, nil
}

// ClientCommand implements driver.Driver: `sockperf ping-pong ... --full-rtt`,
// so the percentiles are round trips (one-way is derived as RTT/2). sockperf
// has a fixed 400 ms warmup of its own, recorded from its output; the spec's
// warmup is not applied. Parallel connections are refused.
func (d toolDriver) ClientCommand(spec driver.Spec) ([]string, error) {
	if err := d.CheckClient(spec); err != nil {
		return nil, err
	}
	if spec.MsgSize < MinMsgSize {
		return nil, fmt.Errorf("sockperf's smallest message is %d bytes (its header), got %d; use a size >= %d or engine qperf/builtin for smaller messages", MinMsgSize, spec.MsgSize, MinMsgSize)
	}
	if spec.MsgSize > limits.SockperfMaxMsg {
		return nil, fmt.Errorf("sockperf's largest message is %d bytes, got %d; use a smaller size or engine builtin", limits.SockperfMaxMsg, spec.MsgSize)
	}
	if spec.Test == result.UDPLat && spec.MsgSize > limits.MaxUDPPayload {
		return nil, fmt.Errorf("sockperf udp_lat: message size %d is larger than one UDP datagram (%d bytes)", spec.MsgSize, limits.MaxUDPPayload)
	}
	secs, err := driver.WholeSeconds("sockperf", spec.Duration)
	if err != nil {
		return nil, err
	}
	argv := []string{"sockperf", "ping-pong", "-i", spec.Server}
	argv = driver.WithPort(argv, "-p", spec.Port)
	if spec.Test == result.TCPLat {
		argv = append(argv, "--tcp")
	}
	return append(argv, "-m", driver.Itoa(spec.MsgSize), "-t", driver.Itoa(secs), "--full-rtt"), nil
}
