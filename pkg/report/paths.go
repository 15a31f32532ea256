package report

import (
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// Each arm's path MTU and MSS, probed once when the run started and
// carried by every sample of the arm (result.PathMTU), is a column of the
// main table beside the arm's figures: "1450 (vxlan −50), MSS 1410" puts
// a tunnel's cost per packet next to the throughput it costs.

// pathHeader heads the main table's path column.
const pathHeader = "path MTU, MSS"

// armPaths is each arm's path: the first sample of the arm that has one.
func armPaths(ss []store.Sample) map[string]*result.PathMTU {
	paths := map[string]*result.PathMTU{}
	for _, s := range ss {
		if s.Result == nil || s.Result.PathMTU == nil {
			continue
		}
		if _, seen := paths[s.Arm]; !seen {
			paths[s.Arm] = s.Result.PathMTU
		}
	}
	return paths
}

// anyPaths reports whether any arm of the models had its path probed
// (runs stored before the probe existed have none: no column then).
func anyPaths(models []*Model) bool {
	for _, m := range models {
		if len(m.Paths) > 0 {
			return true
		}
	}
	return false
}

// pathCell is an arm's path in the main table, or "—" with why.
func (m *Model) pathCell(arm string, n *notes) TableCell {
	p := m.Paths[arm]
	switch {
	case p == nil:
		return TableCell{Text: "—", Note: n.Add("path not probed (an arm without a lab, or a run stored before path MTU probes)")}
	case p.MTU == nil:
		return TableCell{Text: "—", Note: n.Add("path MTU: " + p.Missing["mtu"])}
	}
	return TableCell{Text: p.Summary()}
}
