package tune

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/errkind"
)

// CPU and memory knobs: frequency scaling, C-state latency, transparent
// hugepages, NUMA balancing, timer migration, and the instruction set the
// OVS kernel module can use.

func init() {
	register(
		perCPUKnob("cpu.governor", "CPU frequency governor", "cpufreq/scaling_governor",
			"more power and heat; no effect where the hypervisor owns frequency",
			both("performance", srcKubeOVNCPU+"; "+srcTunedLatPerf, srcKubeOVNCPU+"; "+srcTunedThrPerf),
			"no cpufreq driver: frequency is not scaled by this kernel (on a VM the hypervisor owns it)"),
		perCPUKnob("cpu.energy_perf_bias", "Energy/performance bias (0 = performance … 15 = power save)", "power/energy_perf_bias",
			"more power", both("0", srcTunedLatPerf, srcTunedThrPerf),
			"no energy_perf_bias: the CPU or hypervisor does not expose the EPB MSR"),
		fileKnob("cpu.intel_pstate.min_perf_pct", "intel_pstate minimum P-state (% of max)", "cpu", ScopeHost,
			"devices/system/cpu/intel_pstate/min_perf_pct", true, "more power",
			both("100", srcTunedLatPerf, srcTunedThrPerf), nil,
			"no intel_pstate driver (other CPU vendor, or a VM without HWP)"),
		dmaLatencyKnob(),
		thpKnob(),
		fileKnob("kernel.numa_balancing", "Automatic NUMA balancing", "cpu", ScopeHost,
			"sys/kernel/numa_balancing", false, "page migrations stop; NUMA-unaware workloads may lose locality",
			map[Profile]Rec{Latency: {"0", srcTunedNetLat}}, nil,
			"kernel built without NUMA balancing"),
		fileKnob("kernel.timer_migration", "Migrate timers to non-idle CPUs", "cpu", ScopeHost,
			"sys/kernel/timer_migration", false, "idle CPUs wake for their own timers: more power",
			map[Profile]Rec{Latency: {"0", srcTunedNetLat}}, nil, ""),
		cpuFlagsKnob(),
	)
}

// fileKnob reads and writes one file under /sys (inSys) or /proc.
func fileKnob(id, title, family string, scope Scope, rel string, inSys bool, risk string,
	recs map[Profile]Rec, j func(*Env, Current, string) (Status, string, string), absentWhy string) *Knob {
	path := func(e *Env) string {
		if inSys {
			return e.sys(rel)
		}
		return e.proc(rel)
	}
	access := "/proc/" + rel
	if inSys {
		access = "/sys/" + rel
	}
	return &Knob{
		ID: id, Title: title, Family: family, Scope: scope, Access: access, Risk: risk, Recs: recs, Judge: j,
		Read: func(e *Env) ([]Current, error) {
			raw, err := os.ReadFile(path(e))
			if err != nil {
				if errors.Is(err, os.ErrNotExist) && absentWhy != "" {
					return nil, fmt.Errorf("%s: %s does not exist", absentWhy, path(e))
				}
				return nil, explain(err)
			}
			return []Current{{Value: norm(string(raw)), Raw: string(raw)}}, nil
		},
		Write: func(e *Env, _ string, v string, _ bool) error { return writeFile(path(e), v) },
	}
}

var cpuDirRE = regexp.MustCompile(`^cpu[0-9]+$`)

// cpus lists cpuN directories under the sys root, in numeric order.
func cpus(e *Env) ([]string, error) {
	ents, err := os.ReadDir(e.sys("devices/system/cpu"))
	if err != nil {
		return nil, explain(err)
	}
	var out []string
	for _, d := range ents {
		if cpuDirRE.MatchString(d.Name()) {
			out = append(out, d.Name())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := strconv.Atoi(out[i][3:])
		b, _ := strconv.Atoi(out[j][3:])
		return a < b
	})
	return out, nil
}

// perCPUKnob is a file under /sys/devices/system/cpu/cpuN/, one target per CPU.
func perCPUKnob(id, title, rel, risk string, recs map[Profile]Rec, absentWhy string) *Knob {
	return &Knob{
		ID: id, Title: title, Family: "cpu", Scope: ScopeHost, Risk: risk, Recs: recs,
		Access: "/sys/devices/system/cpu/cpu*/" + rel,
		Read: func(e *Env) ([]Current, error) {
			list, err := cpus(e)
			if err != nil {
				return nil, err
			}
			var out []Current
			for _, c := range list {
				p := e.sys("devices/system/cpu", c, rel)
				raw, err := os.ReadFile(p)
				if errors.Is(err, os.ErrNotExist) {
					return nil, fmt.Errorf("%s: %s does not exist", absentWhy, p)
				}
				if err != nil {
					out = append(out, Current{Target: c, Err: err})
					continue
				}
				out = append(out, Current{Target: c, Value: norm(string(raw)), Raw: string(raw)})
			}
			return out, nil
		},
		Write: func(e *Env, target, v string, _ bool) error {
			if !cpuDirRE.MatchString(target) {
				return fmt.Errorf("bad cpu target %q", target)
			}
			return writeFile(e.sys("devices/system/cpu", target, rel), v)
		},
	}
}

// thpKnob: the file shows every mode with the active one in brackets
// ("always [madvise] never"); the active word is what gets journaled and
// written back.
func thpKnob() *Knob {
	const rel = "kernel/mm/transparent_hugepage/enabled"
	return &Knob{
		ID: "vm.transparent_hugepages", Title: "Transparent hugepages", Family: "cpu", Scope: ScopeHost,
		Access: "/sys/" + rel, Risk: "never: more TLB misses for large heaps; always: allocation stalls",
		Recs: map[Profile]Rec{Latency: {"never", srcTunedNetLat}, Throughput: {"always", srcTunedThrPerf}},
		Read: func(e *Env) ([]Current, error) {
			raw, err := readFile(e.sys(rel))
			if err != nil {
				return nil, err
			}
			sel := bracketed(raw)
			if sel == "" {
				return []Current{{Err: fmt.Errorf("no [selected] mode in %q", norm(raw))}}, nil
			}
			return []Current{{Value: sel, Raw: sel}}, nil
		},
		Write: func(e *Env, _ string, v string, _ bool) error { return writeFile(e.sys(rel), v) },
	}
}

func bracketed(s string) string {
	fs := strings.Fields(s)
	for _, f := range fs {
		if len(f) > 2 && f[0] == '[' && f[len(f)-1] == ']' {
			return f[1 : len(f)-1]
		}
	}
	if len(fs) == 1 {
		return fs[0] // a plain file holding what was written (fixtures)
	}
	return ""
}

// dmaLatencyKnob is the C-state exit latency limit. The kernel honours a
// request only while the process that wrote it keeps /dev/cpu_dma_latency
// open, so apply cannot set it for later: `cnibench tune hold-latency` holds
// it until Ctrl-C, and `tune verify` holds it while it measures.
func dmaLatencyKnob() *Knob {
	return &Knob{
		ID: "cpu.dma_latency", Title: "C-state exit latency limit (PM QoS, µs)", Family: "cpu", Scope: ScopeHost,
		Access: "/dev/cpu_dma_latency (read: current limit as s32; write: held while open)",
		Risk:   "deep C-states off: more power and heat", AuditOnly: true,
		Why:  "only held while a process keeps /dev/cpu_dma_latency open: run `cnibench tune hold-latency --us 1`",
		Recs: map[Profile]Rec{Latency: {"1", srcTunedLatPerf + " (force_latency=cpu_dma_latency:1)"}},
		Read: func(e *Env) ([]Current, error) {
			v, err := ReadDMALatency(e)
			if err != nil {
				return nil, err
			}
			s := strconv.Itoa(int(v))
			return []Current{{Value: s, Raw: s}}, nil
		},
		Judge: func(_ *Env, c Current, rec string) (Status, string, string) {
			cur, _ := strconv.Atoi(c.Value)
			want, _ := strconv.Atoi(rec)
			if cur <= want {
				return StatusOK, "", fmt.Sprintf("at most %d µs", want)
			}
			return StatusDiffers, "", "above the limit; only a running process can hold it: `cnibench tune hold-latency --us " + rec + "`"
		},
	}
}

// ReadDMALatency returns the current PM QoS CPU latency limit in µs
// (2000000000 means no limit).
func ReadDMALatency(e *Env) (int32, error) {
	p := e.dev("cpu_dma_latency")
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, explain(err)
	}
	if len(b) < 4 {
		return 0, fmt.Errorf("%s: short read (%d bytes)", p, len(b))
	}
	return int32(binary.NativeEndian.Uint32(b[:4])), nil
}

// HoldDMALatency asks the kernel to keep C-state exit latency at most us
// microseconds until the returned release function is called (or the process
// exits).
func HoldDMALatency(e *Env, us int32) (release func() error, err error) {
	p := e.dev("cpu_dma_latency")
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return nil, explain(err)
	}
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(us))
	if _, err := f.Write(b[:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", p, err)
	}
	return f.Close, nil
}

// HoldHelp is `cnibench tune hold-latency --help`'s description.
const HoldHelp = "The kernel honours a /dev/cpu_dma_latency request only while the requesting process keeps\n" +
	"the file open, so this command stays in the foreground; the limit ends when it exits."

// HoldUntil holds the limit at us microseconds until ctx ends (Ctrl-C, for
// `tune hold-latency`), saying on w what it holds and when it let go.
// A negative limit is ErrInvalid.
func HoldUntil(ctx context.Context, e *Env, us int32, w io.Writer) error {
	if us < 0 {
		return errkind.Errorf(ErrInvalid, "--us %d: must be 0 or more microseconds", us)
	}
	release, err := HoldDMALatency(e, us)
	if err != nil {
		return fmt.Errorf("hold cpu_dma_latency: %w (needs root)", err)
	}
	defer release()
	cur, _ := ReadDMALatency(e)
	fmt.Fprintf(w, "holding cpu_dma_latency at %d µs (kernel now reports %d); Ctrl-C to release\n", us, cur)
	<-ctx.Done()
	fmt.Fprintln(w, "released")
	return nil
}

// cpuFlagsKnob checks for popcnt and sse4_2, which the OVS kernel module can
// be built to use (000); cnibench cannot rebuild the module, so audit only.
func cpuFlagsKnob() *Knob {
	return &Knob{
		ID: "cpu.flags.popcnt_sse4_2", Title: "CPU has popcnt and sse4_2 (OVS module build flags)", Family: "cpu",
		Scope: ScopeHost, Access: "/proc/cpuinfo (flags)", Risk: "none (read only)", AuditOnly: true,
		Why:  "rebuild the OVS kernel module with -mpopcnt -msse4.2 (see 000) to use them",
		Recs: both("popcnt sse4_2", srcKubeOVNOVS, srcKubeOVNOVS),
		Read: func(e *Env) ([]Current, error) {
			raw, err := readFile(e.proc("cpuinfo"))
			if err != nil {
				return nil, err
			}
			have := map[string]bool{}
			for _, line := range strings.Split(raw, "\n") {
				k, v, ok := strings.Cut(line, ":")
				if ok && strings.TrimSpace(k) == "flags" {
					for _, f := range strings.Fields(v) {
						have[f] = true
					}
					break // the first CPU speaks for all on x86
				}
			}
			if len(have) == 0 {
				return nil, fmt.Errorf("no flags line in %s (not x86?)", filepath.Join(e.ProcRoot, "cpuinfo"))
			}
			var got []string
			for _, f := range []string{"popcnt", "sse4_2"} {
				if have[f] {
					got = append(got, f)
				}
			}
			v := strings.Join(got, " ")
			if v == "" {
				v = "neither"
			}
			return []Current{{Value: v, Raw: v}}, nil
		},
	}
}
