package stages

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// synthetic builds a run of two arms × 5 repeats of tcp_lat: each repeat
// 1 s of cpu-clock at 1000 Hz (1 ms per sample), 1000 transactions, so one
// sample is 1 CPU-µs per transaction. vxlan has 30 encap samples more.
func synthetic(extraEncap int) ([]store.Sample, map[int]*store.Profile) {
	var ss []store.Sample
	ps := map[int]*store.Profile{}
	seq := 0
	for r := 0; r < 5; r++ {
		for _, arm := range []string{"native", "vxlan"} {
			tcp := 100 + r // a little noise, the same in both arms
			folded := fmt.Sprintf("cnibench;[user];do_syscall_64;tcp_sendmsg %d\nswapper;do_idle;pv_native_safe_halt 500\ncompile;[user] 50\n", tcp)
			n := tcp + 550
			if arm == "vxlan" {
				e := extraEncap + r
				folded += fmt.Sprintf("cnibench;[user];do_syscall_64;tcp_sendmsg;ip_output;vxlan_xmit %d\n", e)
				n += e
			}
			ss = append(ss, store.Sample{Seq: seq, Arm: arm, Test: "tcp_lat", MsgSize: 1, Repeat: r,
				Result: &result.Result{Transactions: &result.Transactions{Count: 1000, PerSec: 1000}}})
			ps[seq] = &store.Profile{Seq: seq, Event: "cpu-clock", Frequency: 1000, CPUs: 2, WindowNs: 1e9,
				Samples: uint64(n), PeriodSum: uint64(n) * 1e6, Folded: folded}
			seq++
		}
	}
	return ss, ps
}

func TestExplain(t *testing.T) {
	ss, ps := synthetic(30)
	cells, err := Cells(ss, ps)
	if err != nil || len(cells) != 2 {
		t.Fatalf("Cells = %d, %v", len(cells), err)
	}
	es, err := Explain(cells, "native", "vxlan")
	if err != nil || len(es) != 1 {
		t.Fatalf("Explain = %v, %v", es, err)
	}
	e := es[0]
	// native: tcp 102 µs (median); vxlan: tcp 102 + encap 32. Idle and the
	// compiler are not the measurement's CPU.
	if math.Abs(e.Total.A-102) > 1e-9 || math.Abs(e.Total.B-134) > 1e-9 || !e.Total.Sure {
		t.Errorf("total = %+v", e.Total)
	}
	if p := e.Parts[0]; p.Stage != Tunnel || math.Abs(p.Delta-32) > 1e-9 || !p.Sure {
		t.Errorf("largest part = %+v", p)
	}
	for _, p := range e.Parts {
		if p.Stage == TCP && (p.Delta != 0 || p.Sure) {
			t.Errorf("tcp, the same in both arms, = %+v", p)
		}
		if !Busy(p.Stage) {
			t.Errorf("%s counted as the measurement's CPU", p.Stage)
		}
	}
	var w bytes.Buffer
	WriteText(&w, es)
	if !strings.Contains(w.String(), "vxlan costs 32 CPU-µs per transaction more than native") || !strings.Contains(w.String(), "encap +32") {
		t.Errorf("text:\n%s", w.String())
	}
	if _, err := Explain(cells, "native", "geneve"); err == nil || !strings.Contains(err.Error(), "native, vxlan") {
		t.Errorf("unknown arm: %v", err)
	}
}

func TestCellsMissingCost(t *testing.T) {
	ss, ps := synthetic(10)
	ps[1].Event = "cycles"
	ss[3].Result = &result.Result{}
	ps[4] = &store.Profile{Seq: 4, Missing: "the client ended before its warmup did"}
	cells, err := Cells(ss, ps)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, c := range cells {
		for _, r := range c.Repeats {
			if r.Missing != "" {
				if r.Cost != nil || r.Total != nil {
					t.Errorf("repeat %d has a cost and a reason", r.Seq)
				}
				missing = append(missing, r.Missing)
			}
		}
	}
	if len(missing) != 3 {
		t.Errorf("reasons: %q", missing)
	}
}

// Two runs of the same arms: the later one's vxlan has 30 CPU-µs more encap
// per transaction, its native is unchanged; an arm in one run only is left
// out.
func TestCompareRuns(t *testing.T) {
	ssA, psA := synthetic(0)
	ssB, psB := synthetic(30)
	a, _ := Cells(ssA, psA)
	b, _ := Cells(ssB, psB)
	only := *b[0]
	only.Arm = "geneve"
	b = append(b, &only)
	es := CompareRuns(a, b, "before", "after")
	if len(es) != 2 || es[0].A != "before/native" || es[1].B != "after/vxlan" {
		t.Fatalf("explanations %+v", es)
	}
	if es[0].Total.Delta != 0 || es[0].Total.Sure {
		t.Errorf("native changed: %+v", es[0].Total)
	}
	if p := es[1].Parts[0]; p.Stage != Tunnel || math.Abs(p.Delta-30) > 1e-9 || !p.Sure {
		t.Errorf("vxlan's largest change %+v", p)
	}
	if a[0].Arm != "native" {
		t.Errorf("CompareRuns renamed its input's arms")
	}
}

// The datapath process's user time by function: resolved names with their
// share, and what the profile could not name said as such.
func TestUserFunctions(t *testing.T) {
	stacks := map[string]uint64{
		"ovs-vswitchd;[user];[user:dp_netdev_input__@ovs-vswitchd]":         6,
		"ovs-vswitchd;[user];[user:__memmove_avx_unaligned_erms@libc.so.6]": 2,
		"ovs-vswitchd;[user];[user:?@ovs-vswitchd-dpdk stripped]":           2,
		"ovs-vswitchd;[user];do_syscall_64;__sys_sendto":                    5, // kernel time: its stages
		"cnibench;[user]": 9,
	}
	fs := UserFunctions(stacks, "ovs-vswitchd")
	if len(fs) != 3 || fs[0].Function != "dp_netdev_input__@ovs-vswitchd" || fs[0].Pct != 60 || fs[2].Samples != 2 {
		t.Fatalf("functions %+v", fs)
	}
	if got := userFunctionsText(fs); got != "60% dp_netdev_input__@ovs-vswitchd, 20% unresolved: ovs-vswitchd-dpdk is stripped (no symbol table), 20% __memmove_avx_unaligned_erms@libc.so.6" {
		t.Errorf("text %q", got)
	}
	if UserFunctions(stacks, "cnibench") != nil {
		t.Error("a process whose functions were not resolved has no split")
	}
	// The user function frames are user time: its stage is the process's.
	if got := Classify("ovs-vswitchd;[user];[user:dp_netdev_input__@ovs-vswitchd]"); got != Stage(UserPrefix+"ovs-vswitchd") {
		t.Errorf("stage of a resolved user sample: %s", got)
	}
}
