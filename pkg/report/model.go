// Package report turns a stored run into the tables of the source
// documents — arms as rows, a test's metric (with its unit) as columns, one
// column per message size where sizes vary — with each cell's median, 95%
// confidence interval and ratio to the run's baseline arm, and renders them
// as a terminal table, markdown, JSON, CSV, OpenMetrics or a self-contained
// HTML page with SVG charts.
//
// model.go holds the model's types; metrics.go the metric catalogue,
// analyze.go the analysis, columns.go the table's columns, flags.go the
// run-level warnings, and the renderers one file each.
//
// All numbers come from pkg/stats over the raw samples in the store; a
// value that was not measured is shown as "—" with its reason, never as 0.
package report

import (
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/stats"
	"github.com/cnibench/cnibench/pkg/store"
)

// Shapes of a run's main table.
const (
	// ShapeLatency is the Kube-OVN/qperf shape: one column per test
	// (tcp_lat, udp_lat, tcp_bw, udp_bw …) and message size, each showing
	// the test's primary metric.
	ShapeLatency = "latency"
	// ShapeThroughput is the Cilium/iperf3 shape, used when a run measures
	// only bandwidth: bitrate and transfer on each side, and sender and
	// receiver CPU.
	ShapeThroughput = "throughput"
)

// NoisyCV is the coefficient of variation above which a cell is flagged noisy.
const NoisyCV = 0.05

// StealPct is the steal time (percent of CPU) above which a cell is flagged:
// another VM took CPU from this one while it was measuring.
const StealPct = 1.0

// cellKey names one cell: arm × test × message size × metric.
type cellKey struct {
	Arm, Test string
	Size      int
	Metric    string
}

// group is (test, size): what the arms are compared on.
type group struct {
	Test string
	Size int
}

// Column is one column of the main table.
type Column struct {
	Test   string
	Size   int
	metric metric
	// Header is e.g. "tcp_lat 1K (µs)"; Unit is the display unit after
	// scaling (Mb/s becomes Gb/s for fast paths); Scale multiplies values.
	Header, Unit string
	Scale        float64
}

// Cell is the statistics of one arm × test × size × metric.
type Cell struct {
	Arm, Test string
	Size      int
	Metric    string
	Unit      string
	// HigherIsBetter is the metric's direction, used by ratios and verdicts.
	HigherIsBetter bool
	Values         []float64 // in Unit, execution order
	// Repeats is each value's repeat (round) in the run: an interleaved
	// run measures every arm once per round, so equal repeats of two arms
	// were measured minutes apart at most (compare --relative pairs them).
	Repeats []int
	Failed  int // samples of this arm/test/size that failed outright
	Summary stats.Summary
	// Ratio is this arm's median over the baseline arm's (nil for the
	// baseline itself or without one); Verdict tests this arm against it.
	Ratio   *stats.Ratio
	Verdict *stats.Verdict
	Flags   []string
	// Missing is why there is no value; set exactly when len(Values) == 0.
	Missing string
	// CDF is the round-trip distribution of the sample closest to the
	// median (latency tests that recorded one).
	CDF []result.CDFPoint
	// Modes is set when the values form two modes (FlagModes).
	Modes *Modes
}

// Model is a run analysed for rendering.
type Model struct {
	Run      *store.Run
	Shape    string
	Arms     []string
	Baseline string // "" when the run has none or its baseline has no samples
	Groups   []group
	Columns  []Column
	cells    map[cellKey]*Cell
	// Keys lists every cell with a value or a reason, in report order.
	Keys  []cellKey
	Flags []Flag
	// Stages is CPU by datapath stage (--profile), rendered after the cells.
	Stages *stages.Report
	// ArmConditions says how each arm was measured (see ArmConditions).
	ArmConditions map[string]string
	// Margin is the equivalence margin the verdicts used (a fraction).
	Margin float64
	// IdleWakeup is the host's idle wake-up penalty, measured once at the
	// start of the run (nil when the run did not measure it).
	IdleWakeup *result.IdleWakeup
	// Paths is each arm's path as probed when the run started (the first
	// of its samples that carries one); arms without one are absent.
	Paths map[string]*result.PathMTU
}

// Cell returns the cell for a key, or nil.
func (m *Model) Cell(arm, test string, size int, metricName string) *Cell {
	return m.cells[cellKey{arm, test, size, metricName}]
}

// cell is arm's cell in a table column, or nil.
func (m *Model) cell(arm string, col Column) *Cell {
	return m.cells[cellKey{arm, col.Test, col.Size, col.metric.Name}]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
