package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cnibench/cnibench/pkg/disrupt"
)

// What a `k8s disrupt` run cost, measured where it ran, as the lab
// measures it in its own process: the probes' and the echo's CPU from the
// readings they print (disrupt.WriteCPU), and each event's agent CPU from
// the agent meters (agents.go) on the client's and the server's node.

// probeCPU is the CPU the probe pods and the echo took from start to end,
// as a percentage of one CPU, or why it has none. The echo reports every
// disrupt.CPUEvery; its log is read again once if its last reading is
// not yet past end.
func (r *Runner) probeCPU(ctx context.Context, ns, echo string, probeLogs [][]byte, start, end time.Time) (*float64, string) {
	var total time.Duration
	for i, b := range probeLogs {
		rs, err := disrupt.DecodeCPU(b)
		if err == nil {
			var d time.Duration
			if d, err = disrupt.CPUBetween(rs, start, end); err == nil {
				total += d
				continue
			}
		}
		return nil, fmt.Sprintf("probe pod %d: %v", i+1, err)
	}
	for try := 0; ; try++ {
		b, err := r.logs(ctx, ns, echo, containerName)
		if err != nil {
			return nil, APIError("read", "log of "+echo, err).Error()
		}
		rs, err := disrupt.DecodeCPU(b)
		if err != nil {
			return nil, "echo pod: " + err.Error()
		}
		if try == 0 && (len(rs) == 0 || rs[len(rs)-1].At.Before(end)) {
			select {
			case <-ctx.Done():
				return nil, "interrupted before the echo's CPU was read"
			case <-time.After(disrupt.CPUEvery + disrupt.CPUEvery/2):
			}
			continue
		}
		d, err := disrupt.CPUBetween(rs, start, end)
		if err != nil {
			return nil, "echo pod: " + err.Error()
		}
		v := 100 * float64(total+d) / float64(end.Sub(start))
		return &v, ""
	}
}

// agentsOver is what every agent on nodes spent from start to end, or
// why that cannot be said: a node whose meter failed or whose agent
// restarted within the window.
func agentsOver(nodes []string, logs map[string][]AgentSample, skip map[string]string, start, end time.Time) (time.Duration, error) {
	var sec float64
	found := false
	for _, n := range nodes {
		if why, ok := skip[n]; ok {
			if why == noAgents {
				continue
			}
			return 0, errors.New(why)
		}
		acs, err := AgentWindow(n, logs[n], start, end)
		if err != nil {
			return 0, err
		}
		for _, ac := range acs {
			if ac.Seconds == nil {
				return 0, fmt.Errorf("node %s: %s", n, ac.Missing)
			}
			sec += *ac.Seconds
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("no datapath agent (%s) runs in the host network of %s", strings.Join(Agents, ", "), strings.Join(nodes, ", "))
	}
	return time.Duration(sec * float64(time.Second)), nil
}

// eventAgentCPU sets each mark's agent CPU: what the agents on nodes spent
// from the mark's start to the next mark's (or the probes' end, t0+total),
// less what they spend idle — their rate from t0 to the first mark, before
// any change — over as long. Agents work after the API answered, so the
// window runs to the next change, not to the mark's end. The figure is
// within the meter's resolution (10 ms per agent) and the idle rate's
// noise of zero when the change cost nothing, and may then be negative.
// A restart's is the new agent's own (restartCPU).
func (r *Runner) eventAgentCPU(ctx context.Context, m *agentMeters, ns string, nodes []string, t0 time.Time, total time.Duration, marks []disrupt.Mark) {
	if len(marks) == 0 {
		return
	}
	// A mark that already says why no agent works for it (a blackhole)
	// keeps its reason.
	preset := make([]bool, len(marks))
	for i, mk := range marks {
		preset[i] = mk.AgentCPUReason != ""
	}
	missing := func(why string) {
		for i := range marks {
			if !preset[i] {
				marks[i].AgentCPU, marks[i].AgentCPUReason = nil, why
			}
		}
	}
	// The meters sample every AgentInterval: the one after the probes'
	// end is due then.
	if !disrupt.WaitUntil(ctx, t0.Add(total+AgentInterval)) {
		missing("interrupted before the agent meters were read")
		return
	}
	since := &metav1.Time{Time: t0.Add(-10 * time.Second)}
	logs, skip := m.read(ctx, r, ns, nodes, since, t0.Add(total).UnixNano())
	idle, err := agentsOver(nodes, logs, skip, t0, t0.Add(marks[0].Start))
	if err != nil {
		missing("agents' idle CPU before the first event: " + err.Error())
		return
	}
	rate := float64(idle) / float64(marks[0].Start) // CPU per wall second
	for i := range marks {
		if preset[i] {
			continue
		}
		mk := &marks[i]
		if mk.Kind == AgentRestart {
			restartCPU(mk, nodes, logs, skip, t0)
			continue
		}
		end := total
		if i+1 < len(marks) {
			end = marks[i+1].Start
		}
		ws, we := t0.Add(mk.Start), t0.Add(end)
		raw, err := agentsOver(nodes, logs, skip, ws, we)
		if err != nil {
			mk.AgentCPU, mk.AgentCPUReason = nil, err.Error()
			continue
		}
		base := time.Duration(rate * float64(we.Sub(ws)))
		v := raw - base
		mk.AgentCPU, mk.AgentCPUReason = &v, ""
		mk.Detail = joinDetail(mk.Detail, fmt.Sprintf("agents on %s: %.0f ms in the %.1f s to the next change, less %.0f ms at their idle rate",
			strings.Join(nodes, ", "), ms(raw), we.Sub(ws).Seconds(), ms(base)))
	}
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// restartCPU sets a restart's agent CPU: what the agent processes that
// started during the restart spent from their start to its end (the new
// agent's work to come back, as the lab counts it), with no idle part
// taken off: all of a new process's work is the restart's.
func restartCPU(mk *disrupt.Mark, nodes []string, logs map[string][]AgentSample, skip map[string]string, t0 time.Time) {
	ws, we := t0.Add(mk.Start), t0.Add(mk.End)
	var total time.Duration
	var started []string
	for _, n := range nodes {
		if why, ok := skip[n]; ok {
			if why == noAgents {
				continue
			}
			mk.AgentCPU, mk.AgentCPUReason = nil, why
			return
		}
		d, pids, err := StartedCPU(n, logs[n], ws, we)
		if err != nil {
			mk.AgentCPU, mk.AgentCPUReason = nil, err.Error()
			return
		}
		total += d
		for _, p := range pids {
			started = append(started, fmt.Sprintf("pid %d on %s", p, n))
		}
	}
	if len(started) == 0 {
		mk.AgentCPU, mk.AgentCPUReason = nil, fmt.Sprintf("no agent process started on %s during the restart", strings.Join(nodes, ", "))
		return
	}
	mk.AgentCPU, mk.AgentCPUReason = &total, ""
	mk.Detail = joinDetail(mk.Detail, fmt.Sprintf("the new agent (%s) spent %.0f ms from its start to the restart's end; the old process's last work is not counted",
		strings.Join(started, ", "), ms(total)))
}
