// Package iperf3 runs iperf3 (the tool behind the Cilium tunnel-mode and the
// OVS userspace UDP tables) behind the driver interface, parsing its -J JSON
// into typed structs.
package iperf3

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/limits"
	"github.com/cnibench/cnibench/pkg/result"
)

// DefaultPort is iperf3's port when -p is not given.
const DefaultPort = 5201

// Driver is the iperf3 driver, registered as engine "iperf3". iperf3
// streams; it has no request/response test. Its version is read as
// "iperf 3.12 (cJSON 1.7.15)" → "3.12".
var Driver driver.Driver = toolDriver{driver.NewTool("iperf3", DefaultPort, versionOf, result.TCPBW, result.UDPBW).
	Refuse("iperf3 has no %s test (it only streams); use engine qperf, sockperf or builtin", result.TCPLat, result.UDPLat, result.TCPCRR)}

// toolDriver is iperf3 as a driver.Tool, with its commands and its parser.
// It holds no state.
type toolDriver struct{ *driver.Tool }

func init() { driver.Register(Driver) }

func versionOf(s string) (string, error) {
	f := strings.Fields(s)
	if len(f) < 2 || f[0] != "iperf" {
		return "", fmt.Errorf("iperf3 version %q: expected \"iperf <version>\"", strings.TrimSpace(firstLine(s)))
	}
	return f[1], nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ServerCommand implements driver.Driver: a one-off server (`-1`) that exits
// after serving one test, so nothing outlives the measurement; with
// spec.Persistent (a Kubernetes server pod, which serves test after test)
// it keeps serving.
func (toolDriver) ServerCommand(spec driver.Spec) ([]string, error) {
	argv := []string{"iperf3", "-s", "-1"}
	if spec.Persistent {
		argv = argv[:2]
	}
	argv = driver.WithPort(argv, "-p", spec.Port)
	return argv, nil
}

// ClientCommand implements driver.Driver. Warmup maps onto iperf3's --omit:
// the first seconds are sent but left out of the end totals. The duration
// must be whole seconds (iperf3 would silently truncate it).
func (d toolDriver) ClientCommand(spec driver.Spec) ([]string, error) {
	if err := d.CheckClient(spec); err != nil {
		return nil, err
	}
	secs, err := driver.WholeSeconds("iperf3", spec.Duration)
	if err != nil {
		return nil, err
	}
	argv := []string{"iperf3", "-c", spec.Server}
	argv = driver.WithPort(argv, "-p", spec.Port)
	argv = append(argv, "-t", driver.Itoa(secs))
	if spec.Warmup > 0 {
		// iperf3 3.12 reads -O as whole seconds (atoi: "0.5" becomes 0), so
		// a fractional warmup is rounded up; the result records the omit
		// iperf3 actually applied (start.test_start.omit).
		w := int((spec.Warmup + time.Second - 1) / time.Second)
		argv = append(argv, "-O", driver.Itoa(w))
	}
	if spec.Parallel > 1 {
		if spec.Parallel > limits.MaxParallel {
			return nil, fmt.Errorf("iperf3 allows at most %d parallel streams, got %d", limits.MaxParallel, spec.Parallel)
		}
		argv = append(argv, "-P", driver.Itoa(spec.Parallel))
	}
	if spec.MsgSize < 0 {
		return nil, fmt.Errorf("iperf3: message size must be positive, got %d", spec.MsgSize)
	}
	switch spec.Test {
	case result.UDPBW:
		if spec.MsgSize > limits.MaxUDPPayload {
			return nil, fmt.Errorf("iperf3 udp_bw: message size %d is larger than one UDP datagram (%d bytes); use a smaller size", spec.MsgSize, limits.MaxUDPPayload)
		}
		if spec.MsgSize > 0 && spec.MsgSize < limits.Iperf3MinUDP {
			return nil, fmt.Errorf("iperf3 udp_bw: message size %d is below iperf3's %d-byte minimum (its header); use a size >= %d or engine builtin", spec.MsgSize, limits.Iperf3MinUDP, limits.Iperf3MinUDP)
		}
		if spec.RateBps < 0 {
			return nil, fmt.Errorf("iperf3 udp_bw: rate must be >= 0, got %v", spec.RateBps)
		}
		// iperf3's UDP default is 1 Mbit/s; 0 means unlimited, which is
		// what rate 0 means in a Spec, so it is always spelled out.
		argv = append(argv, "-u", "-b", strconv.FormatFloat(spec.RateBps, 'f', 0, 64))
		if spec.MsgSize > 0 {
			argv = append(argv, "-l", driver.Itoa(spec.MsgSize))
		}
	case result.TCPBW:
		if spec.MsgSize > limits.Iperf3MaxTCP {
			return nil, fmt.Errorf("iperf3 tcp_bw: message size %d is above iperf3's %d-byte maximum; use a smaller size or engine builtin", spec.MsgSize, limits.Iperf3MaxTCP)
		}
		if spec.RateBps != 0 {
			argv = append(argv, "-b", strconv.FormatFloat(spec.RateBps, 'f', 0, 64))
		}
		if spec.MsgSize > 0 {
			argv = append(argv, "-l", driver.Itoa(spec.MsgSize)) // write size, as qperf's msg_size
		}
	}
	return append(argv, "-J"), nil
}
