package report

import (
	"fmt"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// The fixtures are synthetic runs with fixed input numbers; the tests check
// what the renderers make of them.

// jitter spreads the repeats of a cell by small fixed amounts (CV ≈ 0.6%).
var jitter = []float64{0, 0.008, -0.006, 0.003, -0.002}

// noisyJitter gives one cell a CV above 5%.
var noisyJitter = []float64{0, 0.09, -0.07, 0.05, -0.04}

var t0 = time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)

func latResult(test string, size int, oneWayUs float64, steal float64, tool string) *result.Result {
	r := result.New(result.Tool{Name: tool, Version: "1.0"}, test, size)
	rtt := oneWayUs * 2000
	r.Latency = &result.Latency{
		RTTNs:    result.Dist{Count: 100000, Mean: result.F(rtt), P50: result.F(rtt * 0.97), P99: result.F(rtt * 1.9)},
		OneWayNs: result.Dist{Count: 100000, Mean: result.F(rtt / 2)},
	}
	for _, p := range []struct{ pct, f float64 }{{0, 0.7}, {10, 0.85}, {50, 0.97}, {90, 1.2}, {99, 1.9}, {99.9, 2.6}, {100, 9}} {
		r.Latency.CDF = append(r.Latency.CDF, result.CDFPoint{Percentile: p.pct, Ns: rtt * p.f})
	}
	r.Transactions = &result.Transactions{Count: 100000, PerSec: 1e6 / (2 * oneWayUs)}
	if tool == "qperf" {
		// qperf reports neither CPU split nor a distribution.
		r.Latency.CDF = nil
		r.SetMissing("cpu", "qperf does not report per-side CPU")
		return r
	}
	r.CPU = &result.CPU{
		Client: &result.CPUSide{ProcessPct: result.F(48), StealPct: result.F(steal)},
		Server: &result.CPUSide{ProcessPct: result.F(45), StealPct: result.F(steal)},
	}
	return r
}

func bwResult(test string, size int, mbps, sendCPU, recvCPU float64, missingServerCPU string) *result.Result {
	r := result.New(result.Tool{Name: "iperf3", Version: "3.12"}, test, size)
	r.DurationSeconds = 10
	bytes := int64(mbps * 1e6 / 8 * 10)
	r.Throughput = &result.Throughput{SenderBps: result.F(mbps * 1e6 * 1.001), ReceiverBps: result.F(mbps * 1e6),
		BytesSent: result.I(bytes + bytes/1000), BytesReceived: result.I(bytes)}
	r.CPU = &result.CPU{Client: &result.CPUSide{ProcessPct: result.F(sendCPU), StealPct: result.F(0.1)}}
	if missingServerCPU != "" {
		r.SetMissing("cpu.server", missingServerCPU)
	} else {
		r.CPU.Server = &result.CPUSide{ProcessPct: result.F(recvCPU), StealPct: result.F(0.1)}
	}
	if test == result.UDPBW {
		r.Throughput.ReceiverPps = result.F(mbps * 1e6 / 8 / float64(size))
		r.UDP = &result.UDP{Sent: 1000, Received: 990, Lost: 10, LossPct: 1}
	}
	return r
}

// kubeOVNRun is the Kube-OVN "overlay vs underlay vs host" shape: four qperf
// tests at 1 B, 1 KB and 4 KB. It has a failed cell, a noisy cell, steal
// time on one arm, a qperf arm without CPU figures, and no cpufreq.
func kubeOVNRun() (*store.Run, []store.Sample) {
	run := &store.Run{ID: 7, Name: "cnb-k0vn-lab", Kind: store.KindLab, Baseline: "host",
		Experiment: "name: kube-ovn-overlay-underlay-host\n", Complete: true, Status: "ok",
		Started: t0, Finished: t0.Add(4*time.Minute + 12*time.Second),
		Host: result.Fingerprint{Hostname: "lab1", Kernel: "6.1.0-27-amd64", Distro: "Debian GNU/Linux 12 (bookworm)",
			CPUModel: "AMD EPYC 7B13", Cores: 2, Governor: "", Cnibench: "v0.1.0",
			NICDrivers: map[string]string{"eth0": "virtio_net"}},
		Arms: []store.Arm{
			{Name: "overlay", Description: "pods over a VXLAN overlay", Topology: "vxlan", Engine: "builtin", Knobs: map[string]string{"mtu": "1450"}},
			{Name: "underlay", Description: "pods on the node network", Topology: "native", Engine: "builtin"},
			{Name: "host", Description: "node to node", Topology: "native:nodes", Engine: "qperf"},
		}}
	lat := map[string]float64{"overlay": 15.2, "underlay": 14.3, "host": 16.6}
	bw := map[string]float64{"overlay": 23.6, "underlay": 24.2, "host": 24.8}
	sizeF := map[int]float64{1: 1, 1024: 1.08, 4096: 2.3}
	bwF := map[int]float64{1: 1, 1024: 420, 4096: 650}
	var ss []store.Sample
	seq := 0
	for rep := 0; rep < 5; rep++ {
		for _, size := range []int{1, 1024, 4096} {
			for _, test := range []string{result.TCPLat, result.UDPLat, result.TCPBW, result.UDPBW} {
				for _, arm := range []string{"overlay", "underlay", "host"} {
					j := jitter[rep]
					if arm == "overlay" && test == result.UDPLat && size == 1024 {
						j = noisyJitter[rep]
					}
					s := store.Sample{RunID: run.ID, Seq: seq, Arm: arm, Test: test, MsgSize: size, Repeat: rep, Engine: "builtin"}
					seq++
					tool := "cnibench"
					if arm == "host" {
						tool, s.Engine = "qperf", "qperf"
					}
					steal := 0.2
					if arm == "underlay" {
						steal = 2.5
					}
					switch test {
					case result.TCPLat, result.UDPLat:
						v := lat[arm] * sizeF[size] * (1 + j)
						if test == result.UDPLat {
							v *= 0.95
						}
						s.Result = latResult(test, size, v, steal, tool)
					default:
						if arm == "underlay" && test == result.UDPBW && size == 4096 {
							s.Error = "qperf: udp_bw: failed to receive: connection refused"
							break
						}
						v := bw[arm] * bwF[size] * (1 + j)
						if test == result.UDPBW {
							v *= 0.11
						}
						s.Result = bwResult(test, size, v, 30, 60, "")
					}
					ss = append(ss, s)
				}
			}
		}
	}
	return run, ss
}

// ciliumRun is the Cilium tunnel-mode shape: iperf3 TCP streams over native
// routing, VXLAN and GENEVE; geneve's receiver CPU was not reported.
func ciliumRun(id int64, host result.Fingerprint, scale float64) (*store.Run, []store.Sample) {
	run := &store.Run{ID: id, Name: fmt.Sprintf("cilium-%s", host.Hostname), Kind: store.KindLab, Baseline: "native",
		Experiment: "name: cilium-tunnel-modes\n", Complete: true, Status: "ok", Started: t0.Add(time.Duration(id) * time.Hour),
		Finished: t0.Add(time.Duration(id)*time.Hour + 3*time.Minute), Host: host,
		Arms: []store.Arm{
			{Name: "native", Topology: "native", Engine: "iperf3"},
			{Name: "vxlan", Topology: "vxlan", Engine: "iperf3"},
			{Name: "geneve", Topology: "geneve", Engine: "iperf3"},
		}}
	rate := map[string]float64{"native": 15800, "vxlan": 3930, "geneve": 4420}
	cpu := map[string][2]float64{"native": {61.5, 77.3}, "vxlan": {12.9, 67.2}, "geneve": {14.4, 69.7}}
	var ss []store.Sample
	seq := 0
	for rep := 0; rep < 5; rep++ {
		for _, arm := range []string{"native", "vxlan", "geneve"} {
			j := jitter[(rep+seq)%5]
			missing := ""
			if arm == "geneve" {
				missing = "the server ran in a pod without a readable /proc/<pid>/stat"
			}
			r := bwResult(result.TCPBW, 131072, rate[arm]*scale*(1+j), cpu[arm][0]*(1+j/2), cpu[arm][1]*(1-j/2), missing)
			ss = append(ss, store.Sample{RunID: id, Seq: seq, Arm: arm, Engine: "iperf3", Test: result.TCPBW, MsgSize: 131072, Repeat: rep, Result: r})
			seq++
		}
	}
	return run, ss
}

var (
	ubuntu20 = result.Fingerprint{Hostname: "ubuntu20", Kernel: "5.4.0-122-generic", Distro: "Ubuntu 20.04.4 LTS",
		CPUModel: "Intel Xeon", Cores: 1, Governor: "performance", Cnibench: "v0.1.0"}
	opensuse15 = result.Fingerprint{Hostname: "opensuse15", Kernel: "5.14.21-150400.22-default", Distro: "openSUSE Leap 15.4",
		CPUModel: "Intel Xeon", Cores: 1, Governor: "powersave", Cnibench: "v0.1.0"}
)
