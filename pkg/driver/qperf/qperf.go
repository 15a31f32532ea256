// Package qperf runs qperf, the tool behind the Kube-OVN tuning tables, behind
// the driver interface. The client command follows the seeds' own form,
// `qperf -t 60 <server ip> -ub -oo msg_size:1 -vu tcp_lat`, plus -vt and -vvs
// so qperf also prints its CPU figures and message counts.
package qperf

import (
	"fmt"
	"strings"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/limits"
	"github.com/cnibench/cnibench/pkg/result"
)

// DefaultPort is qperf's listen (synchronisation) port when -lp is not given.
const DefaultPort = 19765

// Driver is the qperf driver, registered as engine "qperf". qperf has the
// four tests of the seed tables, and no connect/request/response/close test.
var Driver driver.Driver = toolDriver{driver.NewTool("qperf", DefaultPort, versionOf, result.TCPLat, result.UDPLat, result.TCPBW, result.UDPBW).
	Refuse("qperf has no %s test; use engine builtin", result.TCPCRR).
	OneStream("qperf runs one stream per test; for --parallel %d use engine iperf3 or builtin")}

// toolDriver is qperf as a driver.Tool, with its commands and its parser. It
// holds no state.
type toolDriver struct{ *driver.Tool }

func init() { driver.Register(Driver) }

// versionOf reads qperf --version ("qperf 0.4.11" → "0.4.11").
func versionOf(out string) (string, error) {
	f := strings.Fields(out)
	if len(f) < 2 || f[0] != "qperf" {
		return "", fmt.Errorf("qperf --version printed %q, expected \"qperf <version>\"", strings.TrimSpace(out))
	}
	return f[1], nil
}

// ServerCommand implements driver.Driver: `qperf [--listen_port N]`. One
// qperf server serves any number of tests, one after another.
func (toolDriver) ServerCommand(spec driver.Spec) ([]string, error) {
	argv := []string{"qperf"}
	argv = driver.WithPort(argv, "--listen_port", spec.Port)
	return argv, nil
}

// ClientCommand implements driver.Driver. Options qperf has no equivalent
// for (parallel streams, a UDP send rate) are refused rather than ignored, so
// a result never claims a setting that was not applied. qperf has no warmup
// either; that one is not refused, because experiments set one for every
// engine, and the result records warmup_seconds 0, which is what happened.
func (d toolDriver) ClientCommand(spec driver.Spec) ([]string, error) {
	if err := d.CheckClient(spec); err != nil {
		return nil, err
	}
	if spec.RateBps != 0 {
		return nil, fmt.Errorf("qperf has no UDP send rate option (udp_bw always sends as fast as it can); use engine iperf3 or builtin for --rate")
	}
	if spec.MsgSize <= 0 {
		return nil, fmt.Errorf("qperf: message size must be at least 1 byte, got %d", spec.MsgSize)
	}
	if (spec.Test == result.UDPLat || spec.Test == result.UDPBW) && spec.MsgSize > limits.MaxUDPPayload {
		return nil, fmt.Errorf("qperf %s: message size %d is larger than one UDP datagram (%d bytes); use a smaller size", spec.Test, spec.MsgSize, limits.MaxUDPPayload)
	}
	secs, err := driver.WholeSeconds("qperf", spec.Duration)
	if err != nil {
		return nil, err
	}
	argv := []string{"qperf", "-t", driver.Itoa(secs), spec.Server}
	argv = driver.WithPort(argv, "-lp", spec.Port)
	// -ub: bits/s like the seed tables; -oo msg_size:N exactly as the seeds
	// write it; -vu prints the parameters used, -vt the CPU figures, -vvs
	// the message and byte counts.
	argv = append(argv, "-ub", "-oo", fmt.Sprintf("msg_size:%d", spec.MsgSize), "-vu", "-vt", "-vvs", spec.Test)
	return argv, nil
}
