package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/termtable"
)

// wideRun is the widest run a terminal report meets: the default
// experiment's shape in a precision-driven run (a flag "n=…" on every
// cell), five arms with long names and descriptions, all five tests, the
// extra metrics of the OVS experiments, disturbed samples and retakes, a
// two-mode cell, a host that probed a long list of capabilities and a
// wake-up calibration sentence on every arm.
func wideRun() (*store.Run, []store.Sample) {
	host := result.Fingerprint{Hostname: "worker-node-17.example.internal", Kernel: "6.18.44-fc-v669-cloud-amd64",
		Distro: "Debian GNU/Linux 12 (bookworm)", CPUModel: "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", Cores: 2, Cnibench: "357233c",
		NICDrivers:   map[string]string{"eth0": "virtio_net", "eth1": "ena"},
		Capabilities: strings.Fields("big-tcp bpf-fib-lookup bpf-redirect-neigh bpf-redirect-peer btf busy-poll cpuidle iptables-legacy iptables-nft nftables ovs-dpdk ovs-userspace perf-software tcx vxlan xdp-veth")}
	arms := []string{"host-network", "veth-pair-default", "linux-bridge-underlay", "native-routing-32", "vxlan-overlay-mtu1450"}
	run := &store.Run{ID: 42, Name: "default-20261126T191753Z", Kind: store.KindLab, Baseline: arms[0], Complete: true,
		Status:  "complete; precision ±5% reached by 17 of 25 cells after 27 extra rounds (8 cells did not reach it within the budget)",
		Started: t0, Finished: t0.Add(4*time.Minute + 30*time.Second), Host: host,
		Labels: map[string]string{"precision": "5%", "budget": "4m30s", LabelMetrics: "rtt_p99_us,udp_loss_pct,server_cpu_s_per_gb"}}
	for _, a := range arms {
		run.Arms = append(run.Arms, store.Arm{Name: a, Topology: a, Engine: "builtin", Knobs: map[string]string{"mtu": "1450", "offloads": "off"},
			Description: "two pods on two nodes joined by " + a + ", with the kube-proxy rules of 10,000 Services"})
	}
	tests := []string{result.TCPLat, result.UDPLat, result.TCPCRR, result.TCPBW, result.UDPBW}
	var ss []store.Sample
	for rep := 0; rep < 8; rep++ {
		for ai, arm := range arms {
			for _, test := range tests {
				j := jitter[(rep+ai)%5]
				if rep%3 == 0 {
					j = noisyJitter[(rep+ai)%5]
				}
				f := 1 + 0.15*float64(ai)
				var r *result.Result
				switch test {
				case result.TCPLat, result.UDPLat, result.TCPCRR:
					us := 5.9 * f * (1 + j)
					if arm == arms[1] && test == result.TCPLat && rep%2 == 1 {
						us *= 2.2 // the second mode
					}
					r = latResult(test, 1, us, 0.2, "cnibench")
				default:
					r = bwResult(test, 65536, 11700/f*(1+j), 40, 70, "")
					r.CPU.Server.SecondsPerGB = result.F(0.2 * f)
				}
				r.Conditions = &result.Conditions{Wakeup: "hold",
					WakeupWhy:   "cross-CPU wake-up one way: none 5.1 µs, spin 26.9 µs, hold 3.8 µs; hold is 25% faster than none",
					Disturbance: &result.Disturbance{Disturbed: rep == 2 && ai == 3, OthersCPUPct: 14, Busiest: "go", Why: []string{"others"}}}
				ss = append(ss, store.Sample{RunID: run.ID, Seq: len(ss), Arm: arm, Engine: "builtin", Test: test, MsgSize: map[bool]int{true: 1, false: 65536}[r.Latency != nil],
					Repeat: rep, Result: r})
			}
		}
	}
	return run, ss
}

// Every line of every terminal page — reports of one run and of several,
// comparisons, histories — is at most TextWidth columns wide, counted as
// a terminal counts them (µ, ±, × and box drawing take one column), and
// no value of the main table is lost on the way.
func TestTextFitsTheTerminal(t *testing.T) {
	wide, wideSS := wideRun()
	kube, kubeSS := kubeOVNRun()
	c1, s1 := ciliumRun(3, ubuntu20, 1)
	c2, s2 := ciliumRun(4, opensuse15, 1.12)
	long := opensuse15
	long.Kernel = "5.14.21-150400.24.100-default-with-a-vendor-suffix"
	c3, s3 := ciliumRun(5, long, 0.9)
	pages := map[string]func(*bytes.Buffer) error{
		"wide run": func(b *bytes.Buffer) error { return RenderRuns(b, FormatTable, []Input{{wide, wideSS}}) },
		"kube-ovn": func(b *bytes.Buffer) error { return RenderRuns(b, FormatTable, []Input{{kube, kubeSS}}) },
		"three hosts side by side": func(b *bytes.Buffer) error {
			return RenderRuns(b, FormatTable, []Input{{c1, s1}, {c2, s2}, {c3, s3}})
		},
		"wide run beside kube-ovn": func(b *bytes.Buffer) error {
			return RenderRuns(b, FormatTable, []Input{{wide, wideSS}, {kube, kubeSS}})
		},
		"compare": func(b *bytes.Buffer) error { return Compare(b, c1, s1, c3, s3) },
		"compare two arms of the wide run": func(b *bytes.Buffer) error {
			a, bb := store.Loaded{Run: wide, Samples: wideSS}, store.Loaded{Run: wide, Samples: wideSS}
			if err := a.OnlyArm(wide.Arms[0].Name, ""); err != nil {
				return err
			}
			if err := bb.OnlyArm(wide.Arms[4].Name, ""); err != nil {
				return err
			}
			store.PairArms(&a, &bb)
			return CompareFormat(b, FormatTable, a.Run, a.Samples, bb.Run, bb.Samples)
		},
		"history": func(b *bytes.Buffer) error {
			return WriteHistory(b, FormatTable, BuildHistory("nightly", historyRuns(), stats.EDivisiveOptions{}))
		},
	}
	for name, page := range pages {
		var b bytes.Buffer
		if err := page(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, l := range strings.Split(b.String(), "\n") {
			if w := termtable.Width(l); w > 100 {
				t.Errorf("%s, line %d is %d columns wide:\n%s", name, i+1, w, l)
			}
		}
	}
	// The values survive: each of the wide run's main-table values is on
	// one line of the page, whole (a two-mode cell's modes each on theirs).
	var b bytes.Buffer
	if err := RenderRuns(&b, FormatTable, []Input{{wide, wideSS}}); err != nil {
		t.Fatal(err)
	}
	d, _ := NewDocument([]Input{{wide, wideSS}}, nil)
	for _, row := range d.Main.Rows {
		for _, c := range row[1:] {
			for _, v := range strings.Split(c.Text, " / ") {
				if !strings.Contains(b.String(), v) {
					t.Errorf("the page lacks the value %q", v)
				}
			}
		}
	}
	if !strings.Contains(b.String(), "2 modes") {
		t.Error("the wide run's two-mode cell is not flagged")
	}
}

// The table fitter's own rules: a table that fits is left alone, a wide
// one is wrapped inside its cells, one too wide for that is dealt into
// tables that repeat the labels.
func TestFitTable(t *testing.T) {
	cell := func(s string) TableCell { return TableCell{Text: s} }
	narrow := Table{Header: []string{"arm", "x"}, LabelCols: 1, Rows: [][]TableCell{{cell("a"), cell("1.00 ±0.01")}}}
	if gs := termtable.Fit(termCells(narrow), 100, termtable.Boxed); len(gs) != 1 || gs[0].Rows[0][1] != "1.00 ±0.01" {
		t.Errorf("a narrow table was changed: %+v", gs)
	}
	var hdr []string
	var row []TableCell
	for i := 0; i < 9; i++ {
		hdr = append(hdr, fmt.Sprintf("column %d", i))
		row = append(row, TableCell{Text: "12.3 ±0.4 ×1.05", Flags: []string{"noisy", "1 disturbed", "n=12"}})
	}
	wide := Table{Header: append([]string{"arm"}, hdr...), LabelCols: 1, Rows: [][]TableCell{append([]TableCell{cell("vxlan")}, row...)}}
	gs := termtable.Fit(termCells(wide), 100, termtable.Boxed)
	if len(gs) < 2 {
		t.Fatalf("nine wide columns in one table")
	}
	for _, g := range gs {
		if g.Rows[0][0] != "vxlan" {
			t.Errorf("a dealt table lacks the label: %v", g.Rows[0])
		}
		out := g.Draw(termtable.Boxed)
		for _, l := range strings.Split(out, "\n") {
			if termtable.Width(l) > 100 {
				t.Errorf("line of %d columns:\n%s", termtable.Width(l), out)
			}
		}
		// A value stays whole; its flags wrap below it.
		if !strings.Contains(out, "12.3 ±0.4 ×1.05") || !strings.Contains(out, "[noisy,") {
			t.Errorf("value or flags broken:\n%s", out)
		}
	}
}
