package datapath

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
)

// Look gathers what Recognize needs beyond the links and agents a probe
// already has: each agent's command line from procRoot (world-readable),
// and with deep — root with CAP_SYS_PTRACE — the agents' own answers:
// Cilium's API over its socket and flanneld's configuration files, both
// reached through /proc/<pid>/root, so the path is the one the agent uses
// whatever mount namespace or host path it was given.
func Look(ctx context.Context, procRoot string, links []string, agents map[int]string, deep bool) Seen {
	s := Seen{Links: links, Agents: agents, Args: map[int][]string{}}
	for pid := range agents {
		if b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cmdline")); err == nil {
			s.Args[pid] = ParseCmdline(b)
		}
	}
	if !deep {
		return s
	}
	for pid, name := range agents {
		root := filepath.Join(procRoot, strconv.Itoa(pid), "root")
		switch name {
		case "cilium-agent":
			if s.Cilium != nil {
				continue
			}
			c, err := AskCilium(ctx, filepath.Join(root, CiliumSocket))
			if err != nil {
				s.CiliumErr = err.Error()
				continue
			}
			s.Cilium, s.CiliumErr = &c, ""
		case "flanneld":
			if f, err := ReadFlannel(root, s.Args[pid]); err == nil {
				s.Flannel = f
			}
		}
	}
	return s
}
