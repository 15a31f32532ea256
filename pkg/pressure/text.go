package pressure

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints each ramp as a table of its steps and its knee line.
func WriteText(w io.Writer, d *Document) {
	for _, a := range d.Arms {
		for _, r := range a.Ramps {
			fmt.Fprintf(w, "\n%s (%s %s), %d held flows (established %d, failed to open %d), repeat %d\n",
				a.Arm, a.Topology, knobText(a.Knobs), r.Flows, r.Held.Established, r.Held.OpenFailed, r.Repeat)
			if r.Held.OpenFailed > 0 {
				ct := ctSummary(r.Held.Counters)
				fmt.Fprintf(w, "held flows not opened: %d timed out, %d refused or reset, %d client errors; conntrack count/max %s, drop %d, early_drop %d\n",
					r.Held.OpenTimedOut, r.Held.OpenRefused, r.Held.OpenClient, ct.countMax, ct.drop, ct.early)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			ovs := false
			for _, s := range r.Steps {
				ovs = ovs || s.OVS != nil || s.OVSMissing != ""
			}
			head := "offered/s\tdone/s\tfailed %\ttimed out\tp99 ms\tclient cpu %\thost cpu %\tct count/max\tct drop\tearly_drop\tinsert_failed\tsyn retrans\tlisten ovf\theld alive\t"
			if ovs {
				head += "ovs upcalls\tovs lost\tovs flows\t"
			}
			fmt.Fprintln(tw, head)
			for _, s := range r.Steps {
				ct := ctSummary(s.Namespaces)
				fmt.Fprintf(tw, "%.0f\t%.0f\t%.2f\t%d\t%s\t%.0f\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t",
					s.OfferedRate, s.AchievedRate, 100*s.FailedShare, s.TimedOut, optMs(s.P99Ms), 100*s.ClientCPU, optPct(s.HostCPUBusy),
					ct.countMax, ct.drop, ct.early, ct.insertFailed, tcpOf(s.Namespaces, "client", "TcpExt.TCPSynRetrans"),
					tcpOf(s.Namespaces, "server", "TcpExt.ListenOverflows"), s.HeldAlive)
				switch {
				case !ovs:
				case s.OVS != nil:
					fmt.Fprintf(tw, "%d\t%d\t%d\t", s.OVS.Missed, s.OVS.Lost, s.OVS.Flows)
				default:
					fmt.Fprint(tw, "-\t-\t-\t")
				}
				fmt.Fprintln(tw)
			}
			tw.Flush()
			switch {
			case r.Error != "":
				fmt.Fprintf(w, "error: %s\n", r.Error)
			case r.Knee != nil:
				last := "none (the first step failed)"
				if r.Knee.LastGoodRate != nil {
					last = fmt.Sprintf("%.0f/s", *r.Knee.LastGoodRate)
				}
				who := "the datapath"
				if r.Knee.ClientLimited {
					who = "the client, not the datapath"
				}
				fmt.Fprintf(w, "knee: last good %s; failed at %.0f/s offered: %s (%s)\n", last, r.Knee.FailedOffered, r.Knee.Cause, who)
				for _, e := range r.Knee.Evidence {
					fmt.Fprintf(w, "  %s\n", e)
				}
			default:
				fmt.Fprintf(w, "no knee: %s\n", r.NoKnee)
			}
		}
	}
}

func knobText(k map[string]string) string {
	var parts []string
	for _, n := range sortedKeys(k) {
		parts = append(parts, n+"="+k[n])
	}
	return strings.Join(parts, " ")
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

type ctSum struct {
	countMax                  string
	drop, early, insertFailed uint64
}

// ctSummary sums the conntrack statistics over the namespaces and shows
// the fullest table's count/max.
func ctSummary(ns []NSCounters) ctSum {
	s := ctSum{countMax: "-"}
	best := -1.0
	for _, n := range ns {
		if !n.Conntrack || n.Stats == nil {
			continue
		}
		s.drop += n.Stats.Drop
		s.early += n.Stats.EarlyDrop
		s.insertFailed += n.Stats.InsertFailed
		if n.Max > 0 {
			if f := float64(n.Count) / float64(n.Max); f > best {
				best = f
				s.countMax = fmt.Sprintf("%d/%d", n.Count, n.Max)
			}
		}
	}
	return s
}

func tcpOf(ns []NSCounters, role, name string) int64 {
	for _, n := range ns {
		if n.Role == role {
			return n.TCP[name]
		}
	}
	return 0
}

func optMs(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

func optPct(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", 100**v)
}
