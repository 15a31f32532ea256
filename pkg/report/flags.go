package report

// Run-level warnings about how far a run's numbers can be trusted (steal,
// noise, disturbance, failed steps, a missing governor).

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// Flag is a run-level warning about the trustworthiness of its numbers.
type Flag struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// runFlags are the warnings about the environment of a whole run.
func runFlags(run *store.Run, ss []store.Sample, m *Model) []Flag {
	var flags []Flag
	if !run.Complete {
		msg := "the run is incomplete"
		if run.Status != "" {
			msg += ": " + run.Status
		}
		flags = append(flags, Flag{"incomplete", msg})
	}
	if run.Baseline != "" && m.Baseline == "" {
		flags = append(flags, Flag{"no-baseline", fmt.Sprintf("the baseline arm %q has no samples: no ratios or verdicts against it", run.Baseline)})
	}
	// Governors of the run's host and of every endpoint that reported one.
	govs := map[string][]string{} // governor -> hosts
	add := func(fp *result.Fingerprint, who string) {
		if fp == nil {
			return
		}
		if fp.Hostname != "" {
			who = fp.Hostname
		}
		for _, h := range govs[fp.Governor] {
			if h == who {
				return
			}
		}
		govs[fp.Governor] = append(govs[fp.Governor], who)
	}
	add(&run.Host, "the run's host")
	for _, s := range ss {
		if s.Result != nil {
			add(s.Result.Env.Client, "a client host")
			add(s.Result.Env.Server, "a server host")
		}
	}
	var names []string
	for g := range govs {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		hosts := hostList(govs[g])
		switch g {
		case "performance":
		case "":
			flags = append(flags, Flag{"no-cpufreq", "no CPU frequency governor reported on " + hosts +
				" (no cpufreq, e.g. a VM): frequency scaling is unknown"})
		case "powersave":
			flags = append(flags, Flag{"powersave", "CPU governor is powersave on " + hosts +
				": latency is higher and unstable (cpupower frequency-set -g performance)"})
		default:
			flags = append(flags, Flag{"frequency-scaling", fmt.Sprintf("CPU governor is %s on %s: the frequency changes with load", g, hosts)})
		}
	}
	var noisy, steal int
	for _, col := range m.Columns {
		for _, arm := range m.Arms {
			c := m.cell(arm, col)
			if c == nil {
				continue
			}
			for _, f := range c.Flags {
				switch f {
				case "noisy":
					noisy++
				case "steal":
					steal++
				}
			}
		}
	}
	if steal > 0 {
		flags = append(flags, Flag{"steal", fmt.Sprintf("%s measured with steal time > %.0f%%: another VM took CPU during the measurement", cells(steal), StealPct)})
	}
	if noisy > 0 {
		flags = append(flags, Flag{"noisy", fmt.Sprintf("%s with a coefficient of variation > %.0f%%: repeat with longer tests or on a quieter host", cells(noisy), NoisyCV*100)})
	}
	return flags
}

func cells(n int) string {
	if n == 1 {
		return "1 table cell"
	}
	return fmt.Sprintf("%d table cells", n)
}

// hostList names up to four hosts and counts the rest, so a Kubernetes run
// with a pod per scenario and repeat does not print a paragraph of names.
func hostList(hosts []string) string {
	const show = 4
	if len(hosts) <= show {
		return strings.Join(hosts, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(hosts[:show], ", "), len(hosts)-show)
}
