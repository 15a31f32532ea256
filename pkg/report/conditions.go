package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/disturb"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// WakeupShare is the share of a latency cell's one-way time above which the
// report says the cell is dominated by waking idle CPUs: the calibrated
// cost of one cross-CPU wake-up (result.Conditions.IdleWakeupUs) is at
// least this part of the measured one-way latency, and no wake-up policy
// was in force.
const WakeupShare = 0.5

// splitRetaken separates the samples a --retake-disturbed run measured
// again: the report's statistics use the retake, and the originals are
// listed in a note, never silently dropped.
func splitRetaken(ss []store.Sample) (used, retaken []store.Sample) {
	again := map[int]bool{}
	for _, s := range ss {
		if c := conditionsOf(s.Result); c != nil && c.RetakeOf != nil {
			again[*c.RetakeOf] = true
		}
	}
	for _, s := range ss {
		if again[s.Seq] {
			retaken = append(retaken, s)
		} else {
			used = append(used, s)
		}
	}
	return used, retaken
}

func conditionsOf(r *result.Result) *result.Conditions {
	if r == nil {
		return nil
	}
	return r.Conditions
}

// ArmConditions describes how each arm was measured — wake-up policy and
// CPU placement — from its samples, e.g. "wake-up none (auto: …), CPUs
// client=0,server=1". An arm with no recorded conditions is absent.
func ArmConditions(ss []store.Sample) map[string]string {
	type seen struct {
		wake, why, cpus map[string]bool
	}
	per := map[string]*seen{}
	for _, s := range ss {
		c := conditionsOf(s.Result)
		if c == nil {
			continue
		}
		a := per[s.Arm]
		if a == nil {
			a = &seen{map[string]bool{}, map[string]bool{}, map[string]bool{}}
			per[s.Arm] = a
		}
		a.wake[c.Wakeup] = true
		if c.WakeupWhy != "" {
			// pkg/wakeup's reasons say "auto: …" themselves; older
			// results' do not. The line below says it once.
			a.why[strings.TrimPrefix(c.WakeupWhy, "auto: ")] = true
		}
		a.cpus[placement(c)] = true
	}
	out := map[string]string{}
	for arm, a := range per {
		w := "wake-up " + joinSorted(a.wake)
		if len(a.why) > 0 {
			w += " (auto: " + joinSorted(a.why) + ")"
		}
		out[arm] = w + ", CPUs " + joinSorted(a.cpus)
	}
	return out
}

func placement(c *result.Conditions) string {
	var parts []string
	if c.ClientCPU != nil {
		parts = append(parts, fmt.Sprintf("client=%d", *c.ClientCPU))
	}
	if c.ServerCPU != nil {
		parts = append(parts, fmt.Sprintf("server=%d", *c.ServerCPU))
	}
	if len(parts) == 0 {
		return "not pinned"
	}
	return strings.Join(parts, ",")
}

// cellConditionFlags are a cell's flags from how its samples were taken:
// "N disturbed" when some were taken on a disturbed machine, and "wakeup"
// when its latency is dominated by waking idle CPUs.
func cellConditionFlags(test string, primaryMetric bool, median float64, used []store.Sample) []string {
	var flags []string
	disturbed := 0
	var wake []float64
	none := true
	for _, s := range used {
		c := conditionsOf(s.Result)
		if c == nil {
			continue
		}
		if c.Disturbance != nil && c.Disturbance.Disturbed {
			disturbed++
		}
		if c.Wakeup != "none" {
			none = false
		}
		if c.IdleWakeupUs != nil {
			wake = append(wake, *c.IdleWakeupUs)
		}
	}
	if disturbed > 0 {
		flags = append(flags, fmt.Sprintf("%d disturbed", disturbed))
	}
	if primaryMetric && (test == result.TCPLat || test == result.UDPLat) && none && len(wake) > 0 && median > 0 {
		if wake[0]/median >= WakeupShare {
			flags = append(flags, "wakeup")
		}
	}
	return flags
}

// conditionFlags are the run-level notes on disturbed samples, retakes and
// wake-up dominated cells.
func conditionFlags(m *Model, used, retaken []store.Sample) []Flag {
	var flags []Flag
	var ds []*result.Disturbance
	for _, s := range used {
		if c := conditionsOf(s.Result); c != nil {
			ds = append(ds, c.Disturbance)
		}
	}
	if n, why := disturb.Summary(ds); n > 0 {
		busiest := map[string]bool{}
		for _, d := range ds {
			if d != nil && d.Disturbed && d.Busiest != "" && d.OthersCPUPct > disturb.MaxOthersCPUPct {
				busiest[d.Busiest] = true
			}
		}
		who := ""
		if len(busiest) > 0 {
			who = "; busiest other processes: " + joinSorted(busiest)
		}
		flags = append(flags, Flag{"disturbed", fmt.Sprintf(
			"%d of %d samples were taken while the machine was disturbed (%s%s): see [N disturbed]; rerun with --retake-disturbed or on a quieter host",
			n, len(ds), strings.Join(why, ", "), who)})
	}
	if len(retaken) > 0 {
		var list []string
		for _, s := range retaken {
			list = append(list, fmt.Sprintf("#%d %s %s %s", s.Seq, s.Arm, s.Test, FormatSize(s.MsgSize)))
		}
		sort.Strings(list)
		if len(list) > 8 {
			list = append(list[:8], fmt.Sprintf("… %d more (JSON: conditions.retake_of)", len(list)-8))
		}
		flags = append(flags, Flag{"retaken", fmt.Sprintf(
			"%d disturbed samples were measured again (--retake-disturbed); the statistics use the retakes, the originals are kept in the database: %s",
			len(retaken), strings.Join(list, "; "))})
	}
	wake := 0
	var cost float64
	for _, k := range m.Keys {
		c := m.cells[k]
		for _, f := range c.Flags {
			if f == "wakeup" {
				wake++
			}
		}
	}
	how := "a pipe ping-pong between two pinned threads, calibrated at the start of the run"
	for _, s := range used {
		if c := conditionsOf(s.Result); c != nil && c.IdleWakeupUs != nil {
			cost = *c.IdleWakeupUs
			if c.IdleWakeup != nil {
				// Newer runs measure it on the real path: the header says how.
				how = "the host's idle wake-up penalty in the header"
			}
			break
		}
	}
	if wake > 0 {
		flags = append(flags, Flag{"wakeup", fmt.Sprintf(
			"%s with a one-way latency at most %.0f× what waking a blocked thread on another CPU costs here with no policy (%.1f µs one way: %s): most of it is the host's wake-up path, not the datapath; compare arms on the same policy, or try --wakeup spin or hold",
			cells(wake), 1/WakeupShare, cost, how)})
	}
	return flags
}

// anyFlag reports whether a cell of the models carries one of the flags
// (a flag "N disturbed" matches "disturbed").
func anyFlag(models []*Model, names ...string) bool {
	for _, m := range models {
		for _, c := range m.cells {
			for _, f := range c.Flags {
				for _, n := range names {
					if f == n || strings.HasSuffix(f, " "+n) {
						return true
					}
				}
			}
		}
	}
	return false
}

// precisionFlags marks, in a precision-driven run (the run's "precision"
// label), every table cell with its number of samples and whether its
// median's 95% CI reached ±P, and adds a note counting them: the report
// says per cell what the stopping rule achieved.
func precisionFlags(m *Model) []Flag {
	label := strings.TrimSuffix(strings.TrimSpace(m.Run.Labels["precision"]), "%")
	p, err := strconv.ParseFloat(label, 64)
	if err != nil || p <= 0 {
		return nil
	}
	p /= 100
	var reached, total int
	var missed []string
	for _, k := range m.Keys {
		c := m.cells[k]
		if k.Metric != primary(k.Test).Name || len(c.Values) == 0 {
			continue
		}
		total++
		med := math.Abs(c.Summary.Median)
		rel := math.Inf(1)
		if med > 0 && c.Summary.N >= 2 {
			rel = c.Summary.MedianCI.HalfWidth(c.Summary.Median) / med
		}
		if rel <= p {
			reached++
			c.Flags = append(c.Flags, fmt.Sprintf("n=%d", c.Summary.N))
		} else {
			c.Flags = append(c.Flags, fmt.Sprintf("n=%d >±%g%%", c.Summary.N, p*100))
			missed = append(missed, fmt.Sprintf("%s %s %s", k.Arm, k.Test, FormatSize(k.Size)))
		}
	}
	if total == 0 {
		return nil
	}
	msg := fmt.Sprintf("precision ±%g%% (budget %s): %d of %d table cells reached it", p*100, m.Run.Labels["budget"], reached, total)
	if len(missed) > 0 {
		if len(missed) > 6 {
			missed = append(missed[:6:6], fmt.Sprintf("… %d more (cells marked >±%g%%)", len(missed)-6, p*100))
		}
		msg += "; not reached: " + strings.Join(missed, ", ") + " (more samples, a quieter host, or a larger budget)"
	}
	return []Flag{{"precision", msg}}
}
