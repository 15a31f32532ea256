package experiment

import (
	"context"

	"github.com/cnibench/cnibench/pkg/result"
)

// Each arm's path is probed once, as soon as its lab is up and before any
// step: its MTU, how that is bounded (the link, an ICMP frag-needed, a
// black hole) and TCP's MSS over it (pkg/pathmtu through lab.ProbePath).
// Every sample of the arm carries it (result.PathMTU), so the report can
// print what a tunnel costs beside what the arm measured.

// PathLab is implemented by lab instances that can probe the path between
// two of their endpoints. The result is non-nil when the endpoints exist,
// also with an error; a nil result comes with the error saying why.
type PathLab interface {
	ProbePath(ctx context.Context, client, server string) (*result.PathMTU, error)
}

// pathKey is one path of a lab: arms on the same lab between the same
// endpoints (e.g. one per engine) share one probe.
type pathKey struct{ lab, client, server string }

// probePaths probes the path of every arm built on lab key, storing each
// in paths by arm index, and logs each.
func probePaths(ctx context.Context, e *Experiment, key string, l LabInstance, paths map[int]*result.PathMTU, prog *progress) {
	pl, ok := l.(PathLab)
	if !ok {
		return
	}
	done := map[pathKey]*result.PathMTU{}
	for i := range e.Arms {
		a := &e.Arms[i]
		if a.LabKey() != key || ctx.Err() != nil {
			continue
		}
		k := pathKey{key, a.Client, a.Server}
		p, seen := done[k]
		if !seen {
			var err error
			p, err = pl.ProbePath(ctx, a.Client, a.Server)
			if p == nil {
				p = &result.PathMTU{}
				p.SetMissing("mtu", err.Error())
			}
			done[k] = p
			prog.logf("arm %s: path %s → %s: %s", a.Name, a.Client, a.Server, p.Summary())
		}
		paths[i] = p
	}
}
