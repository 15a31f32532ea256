package engine

import (
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/sysinfo"
)

// cpuSnap is one side's CPU counters at a mark.
type cpuSnap struct {
	wall      int64
	user, sys float64 // seconds
	rusageErr error
	stat      *sysinfo.Stat
	statErr   error
	ran       ranSnap // where the side's loops ran, sampled
}

// takeCPU snapshots this side's CPU counters and where's placement samples.
func takeCPU(fs sysinfo.FS, where *placement) cpuSnap {
	s := cpuSnap{wall: nanotime(), ran: where.snap()}
	u, sy, err := sysinfo.ProcessCPU()
	s.user, s.sys, s.rusageErr = u.Seconds(), sy.Seconds(), err
	s.stat, s.statErr = fs.ReadStat()
	return s
}

// cpuSide turns two snapshots into a result.CPUSide. txns and bytes are what
// this side's work moved over the interval (0 = not applicable); missing
// receives field names (relative to the side) and reasons.
func cpuSide(a, b cpuSnap, txns, bytes int64, missing map[string]string) *result.CPUSide {
	c := &result.CPUSide{}
	if ran, why := ranOn(a.ran, b.ran); why != "" {
		missing["ran_on"] = why
	} else {
		c.RanOn = ran
	}
	wall := float64(b.wall-a.wall) / 1e9
	if a.rusageErr != nil || b.rusageErr != nil {
		for _, f := range []string{"process_seconds", "process_user_seconds", "process_system_seconds", "process_pct", "us_per_transaction", "seconds_per_gb"} {
			missing[f] = "getrusage failed"
		}
	} else {
		u, s := b.user-a.user, b.sys-a.sys
		c.ProcessUserSeconds, c.ProcessSystemSeconds, c.ProcessSeconds = result.F(u), result.F(s), result.F(u+s)
		if wall > 0 {
			c.ProcessPct = result.F(100 * (u + s) / wall)
		}
		if txns > 0 {
			c.UsPerTransaction = result.F((u + s) * 1e6 / float64(txns))
		} else {
			missing["us_per_transaction"] = "no transactions in this test"
		}
		if bytes > 0 {
			c.SecondsPerGB = result.F((u + s) / (float64(bytes) / 1e9))
		} else {
			missing["seconds_per_gb"] = "no bytes streamed in this test"
		}
	}
	var d *sysinfo.Delta
	err := a.statErr
	if err == nil {
		err = b.statErr
	}
	if err == nil {
		d, err = sysinfo.DeltaStat(a.stat, b.stat)
	}
	if err != nil {
		for _, f := range []string{"user_pct", "system_pct", "softirq_pct", "irq_pct", "idle_pct", "iowait_pct", "steal_pct"} {
			missing[f] = err.Error()
		}
		return c
	}
	t := d.Total
	c.UserPct, c.SystemPct, c.SoftirqPct, c.IrqPct = result.F(t.User), result.F(t.System), result.F(t.Softirq), result.F(t.Irq)
	c.IdlePct, c.IowaitPct, c.StealPct = result.F(t.Idle), result.F(t.Iowait), result.F(t.Steal)
	for n := 0; n < 4096 && len(c.PerCPU) < len(d.PerCPU); n++ {
		s, ok := d.PerCPU[n]
		if !ok {
			continue
		}
		c.PerCPU = append(c.PerCPU, result.CPUSplit{CPU: n, UserPct: s.User, SystemPct: s.System, SoftirqPct: s.Softirq,
			IrqPct: s.Irq, IdlePct: s.Idle, IowaitPct: s.Iowait, StealPct: s.Steal})
	}
	return c
}
