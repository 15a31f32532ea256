package tune

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/termtable"
)

func TestWriteApplyAndJournals(t *testing.T) {
	rep := &ApplyReport{Journal: "/j/1.jsonl",
		Changes: []Change{{Knob: "net.core.busy_poll", Target: "", Old: "0", New: "50"}, {Knob: "x", Netns: "ns1", Target: "eth0", Error: "denied"}},
		Skipped: []Skip{{Knob: "irq.affinity", Reason: "one CPU"}}}
	var b bytes.Buffer
	WriteApply(&b, rep, true)
	out := b.String()
	for _, want := range []string{"would change", "ns1:eth0", "FAILED: denied", "skipped: one CPU", "journal: /j/1.jsonl"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	js := []JournalInfo{{Path: "a", RolledBack: true}, {Path: "b", Unfinished: 1}}
	b.Reset()
	if n := WriteJournals(&b, js, false); n != 1 || !strings.Contains(b.String(), "interrupted") || strings.Contains(b.String(), "rolled back") {
		t.Errorf("journals (%d):\n%s", n, b.String())
	}
}

// auditFindings are findings as `tune audit --profile latency` printed
// them on the development VM (2026-11-26), where the CURRENT, SOURCE and
// NOTE values made lines up to 502 columns wide, plus a namespaced
// target.
func auditFindings() []Finding {
	return []Finding{
		{Knob: "cpu.governor", Profile: Latency, Current: "", Recommended: "performance", Status: StatusCannotRead,
			Source: "000 Kube-OVN tuning § CPU Performance Mode Tuning; tuned latency-performance (included by network-latency)",
			Why:    "no cpufreq driver: frequency is not scaled by this kernel (on a VM the hypervisor owns it): /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor does not exist"},
		{Knob: "cpu.dma_latency", Profile: Latency, Current: "2000000000", Recommended: "1", Status: StatusDiffers,
			Source: "tuned latency-performance (included by network-latency) (force_latency=cpu_dma_latency:1)",
			Why:    "above the limit; only a running process can hold it: `cnibench tune hold-latency --us 1`"},
		{Knob: "irq.nic_affinity", Target: "eth0/irq37", Profile: Latency, Current: "cpus 0-1 (mask 3)", Recommended: "one CPU per IRQ",
			Status: StatusDiffers, Source: "000 Kube-OVN tuning § Interrupt Binding", Why: "may run on cpus 0-1"},
		{Knob: "nic.offloads", Netns: "cnb-7ov7-node2", Target: "eth0/rx-checksum", Profile: Latency, Current: "on [fixed]", Status: StatusNoRec,
			Source: "000 Kube-OVN tuning § Using STT Type Tunnel (TCP offloads)"},
		{Knob: "mtu.consistency", Profile: Latency, Current: "no tunnel devices", Recommended: "tunnel MTU ≤ underlay MTU − overhead; pod MTU ≤ tunnel MTU",
			Status: StatusOK, Source: "004 Cilium tuning § Tunnel Modes (encapsulation overhead); 002 OVS userspace UDP tuning § Tunning Steps (fragments)"},
		{Knob: "net.ipv4.tcp_slow_start_after_idle", Profile: Latency, Current: "1", Status: StatusNoRec,
			Source: "kernel Documentation/networking/ip-sysctl.rst (no seed or tuned profile gives a value)", Why: "audited for the record; no source gives a value"},
		{Knob: "conntrack.hashsize", Profile: Latency, Current: "262144 buckets, 1.0 max entries per bucket", Status: StatusNoRec,
			Source: "kernel nf_conntrack-sysctl.rst (nf_conntrack_buckets)", Why: "shown for the record: entries per bucket = nf_conntrack_max / hashsize"},
		{Knob: "kube-proxy.rules", Profile: Latency, Current: "nftables kube-proxy: 0 rules; iptables-nft KUBE-*: 0 rules; conntrack entries: 0",
			Status: StatusNoRec, Source: "000 Kube-OVN tuning § Disable OVN LB / FastPath (netfilter cost)",
			Why: "every packet of the host network walks these rules; see 000 (FastPath, disable OVN LB) and 004 (kube-proxy replacement)"},
	}
}

// The audit fits a 100-column terminal, with and without the profile
// column, and loses nothing: every knob, value, source and note is on the
// page (sources and notes as footnotes under the table).
func TestWriteFindingsFits(t *testing.T) {
	fs := auditFindings()
	both := append([]Finding(nil), fs...)
	for _, f := range fs {
		f.Profile = Throughput
		both = append(both, f)
	}
	for _, c := range []struct {
		fs          []Finding
		withProfile bool
	}{{fs, false}, {both, true}} {
		var b bytes.Buffer
		if err := WriteFindings(&b, c.fs, c.withProfile); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for i, l := range strings.Split(out, "\n") {
			if w := termtable.Width(l); w > 100 {
				t.Errorf("line %d is %d columns:\n%s", i+1, w, l)
			}
		}
		flat := strings.Join(strings.Fields(out), " ")
		for _, f := range c.fs {
			for _, want := range []string{f.Knob, f.Source, f.Why, string(f.Status)} {
				if !strings.Contains(flat, strings.Join(strings.Fields(want), " ")) {
					t.Errorf("the audit lacks %q:\n%s", want, out)
				}
			}
		}
		// A long target breaks only after a '-' or '/'.
		if !strings.Contains(out, "cnb-7ov7-") || !strings.Contains(out, "node2:eth0/") || !strings.Contains(out, "differs [2]") {
			t.Errorf("namespaced target or note marker missing:\n%s", out)
		}
	}
}
