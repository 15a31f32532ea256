package report

// The main table's columns: one per test, message size and metric shown,
// in the source documents' order, shared by the runs side by side.

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// anyValues reports whether some arm of some model has values for the
// metric in group g.
func anyValues(models []*Model, g group, name string) bool {
	for _, m := range models {
		for _, arm := range m.Arms {
			if c := m.cells[cellKey{arm, g.Test, g.Size, name}]; c != nil && len(c.Values) > 0 {
				return true
			}
		}
	}
	return false
}

func allKind(models []*Model, kind string) bool {
	for _, m := range models {
		if m.Run == nil || m.Run.Kind != kind {
			return false
		}
	}
	return len(models) > 0
}

func (m *Model) buildColumns() { m.Columns = columnsFor([]*Model{m}) }

// columnsFor returns the table columns covering every model: the union of
// their (test, size) groups, in report order, with the metrics of the
// common shape (throughput only when every model has that shape).
func columnsFor(models []*Model) []Column {
	shape := ShapeThroughput
	gset := map[group]bool{}
	tests := map[string]bool{}
	sizes := map[int]bool{}
	for _, m := range models {
		if m.Shape != ShapeThroughput {
			shape = ShapeLatency
		}
		for _, g := range m.Groups {
			gset[g] = true
			tests[g.Test] = true
			sizes[g.Size] = true
		}
	}
	var groups []group
	for g := range gset {
		groups = append(groups, g)
	}
	sortGroups(groups)
	var cols []Column
	for _, g := range groups {
		var extra []string
		for _, m := range models {
			for _, e := range extraMetrics(m.Run) {
				if !contains(extra, e) {
					extra = append(extra, e)
				}
			}
		}
		mts := tableMetricsFor(shape, g.Test, extra)
		// A userspace datapath's CPU goes beside the engine's wherever an
		// arm measured one: its cost is not in the engine's figures.
		if !hasMetric(mts, mDatapathCPU.Name) && anyValues(models, g, mDatapathCPU.Name) {
			mt := mDatapathCPU
			if allKind(models, store.KindK8s) {
				// k8s run --agent-cpu: the nodes' agents, not a lab's daemon.
				mt.Label = "datapath agents CPU"
			}
			mts = append(mts, mt)
		}
		for _, mt := range mts {
			col := Column{Test: g.Test, Size: g.Size, metric: mt, Unit: displayUnit(mt.Unit), Scale: 1}
			if mt.Unit == "Mb/s" {
				var max float64
				for _, m := range models {
					for _, arm := range m.Arms {
						if c := m.cells[cellKey{arm, g.Test, g.Size, mt.Name}]; c != nil && len(c.Values) > 0 {
							max = math.Max(max, c.Summary.Median)
						}
					}
				}
				if max >= 1000 {
					col.Unit, col.Scale = "Gb/s", 1e-3
				}
			}
			var parts []string
			if shape == ShapeLatency || len(tests) > 1 {
				parts = append(parts, g.Test)
			}
			if len(sizes) > 1 {
				parts = append(parts, FormatSize(g.Size))
			}
			// A disruption event's five figures and a ramp's two are
			// all named: the test says which event or held flows, not
			// which figure.
			if shape == ShapeThroughput || mt.Name != primary(g.Test).Name || ownFigures(g.Test) != nil {
				parts = append(parts, mt.Label)
			}
			col.Header = fmt.Sprintf("%s (%s)", strings.Join(parts, " "), col.Unit)
			cols = append(cols, col)
		}
	}
	return cols
}

func sortGroups(gs []group) {
	sort.Slice(gs, func(i, j int) bool {
		a, b := gs[i], gs[j]
		if oa, ob := testOrder(a.Test), testOrder(b.Test); oa != ob {
			return oa < ob
		}
		// Tests outside the engine's list (disruption events, pressure
		// ramps) have one order: without a tie-break they would come out
		// in map order, a different table each time.
		fa, okA := result.PressureFlows(a.Test)
		fb, okB := result.PressureFlows(b.Test)
		if okA && okB && fa != fb {
			return fa < fb
		}
		if a.Test != b.Test {
			return a.Test < b.Test
		}
		return a.Size < b.Size
	})
}
