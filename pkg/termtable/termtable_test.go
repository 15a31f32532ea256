package termtable

import (
	"strings"
	"testing"
)

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// A table that fits is drawn at its natural widths, untouched.
func TestFitLeavesANarrowTable(t *testing.T) {
	tb := Table{Header: []Cell{{"arm"}, Words("tcp_lat (µs)")}, Labels: 1, Right: []bool{false, true},
		Rows: [][]Cell{{{"veth"}, {"6.11 ±0.18 ×1.03", "[noisy]"}}}}
	gs := Fit(tb, 100, Boxed)
	if len(gs) != 1 || gs[0].Rows[0][1] != "6.11 ±0.18 ×1.03 [noisy]" || gs[0].Header[1] != "tcp_lat (µs)" {
		t.Fatalf("Fit = %+v", gs)
	}
	want := []string{
		"┌──────┬──────────────────────────┐",
		"│ arm  │             tcp_lat (µs) │",
		"├──────┼──────────────────────────┤",
		"│ veth │ 6.11 ±0.18 ×1.03 [noisy] │",
		"└──────┴──────────────────────────┘",
	}
	if got := lines(gs[0].Draw(Boxed)); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("drawn:\n%s", strings.Join(got, "\n"))
	}
}

// Too wide: the column whose narrowing adds the fewest lines gives way
// first, units are never broken, and every drawn line fits.
func TestFitNarrowsWhereItCostsFewestLines(t *testing.T) {
	row := func(label string) []Cell {
		return []Cell{{label}, {"12.3 ±0.4 ×1.05", "[noisy,", "n=12]"}, Words("a long prose note that can wrap over several lines of a narrow column")}
	}
	tb := Table{Header: []Cell{{"arm"}, {"value"}, {"note"}}, Labels: 1, Rows: [][]Cell{row("a"), row("b")}}
	gs := Fit(tb, 50, Boxed)
	if len(gs) != 1 {
		t.Fatalf("%d tables", len(gs))
	}
	for _, l := range lines(gs[0].Draw(Boxed)) {
		if Width(l) > 50 {
			t.Errorf("line of %d columns: %s", Width(l), l)
		}
	}
	// The prose wraps; the value keeps its line (its flags may follow).
	if !strings.HasPrefix(gs[0].Rows[0][1], "12.3 ±0.4 ×1.05") || !strings.Contains(gs[0].Rows[0][2], "\n") {
		t.Errorf("cells %q", gs[0].Rows[0])
	}
}

// Columns that cannot fit even at their narrowest are dealt into balanced
// tables, each repeating the labels.
func TestFitDealsColumns(t *testing.T) {
	tb := Table{Header: []Cell{{"arm"}}, Labels: 1}
	r := []Cell{{"vxlan"}}
	for i := 0; i < 7; i++ {
		tb.Header = append(tb.Header, Cell{"c" + string(rune('0'+i))})
		r = append(r, Cell{"123456789012345"})
	}
	tb.Rows = [][]Cell{r}
	gs := Fit(tb, 80, Boxed)
	var sizes []int
	for _, g := range gs {
		sizes = append(sizes, len(g.Header)-1)
		if g.Rows[0][0] != "vxlan" {
			t.Errorf("a dealt table lacks the label: %v", g.Rows[0])
		}
		for _, l := range lines(g.Draw(Boxed)) {
			if Width(l) > 80 {
				t.Errorf("line of %d columns", Width(l))
			}
		}
	}
	// 1+5+3 + k·(15+3) ≤ 80 holds for k ≤ 3: seven columns as 3, 2, 2.
	if len(sizes) != 3 || sizes[0] != 3 || sizes[1] != 2 || sizes[2] != 2 {
		t.Errorf("dealt as %v, want [3 2 2]", sizes)
	}
}

// Plain drawing: two spaces between columns, numbers right-aligned, a
// cell of several lines beside one-line cells, no trailing blanks; a soft
// break joins again on one line.
func TestPlainAndSoftWords(t *testing.T) {
	if got := SoftWords("5.14.21-150400.22-default x"); len(got) != 4 || got[1] != Joiner+"150400.22-" {
		t.Errorf("SoftWords = %q", got)
	}
	g := Grid{Header: []string{"ID", "KERNEL", "N"}, Right: []bool{true, false, true},
		Rows: [][]string{{"1", fill(SoftWords("5.14.21-150400.22-default"), 30), "7"}, {"12", fill(SoftWords("5.14.21-150400.22-default"), 10), "130"}}}
	want := "ID  KERNEL                       N\n" +
		" 1  5.14.21-150400.22-default    7\n" +
		"12  5.14.21-                   130\n" +
		"    150400.22-\n" +
		"    default\n"
	if got := g.Draw(Plain); got != want {
		t.Errorf("plain:\n%s\nwant:\n%s", got, want)
	}
}

// Wrap counts terminal columns, not bytes: a line of µ and ± signs is
// as wide as it looks.
func TestWrapCountsColumns(t *testing.T) {
	s := strings.Repeat("±µ ", 20) // 60 columns, 100 bytes
	if got := Wrap(s, 60, ""); strings.Contains(got, "\n") {
		t.Errorf("wrapped a 59-column line:\n%s", got)
	}
	got := Wrap("  "+strings.Repeat("word ", 30), 40, "    ")
	for i, l := range lines(got) {
		if Width(l) > 40 || (i > 0 && !strings.HasPrefix(l, "    ")) || (i == 0 && !strings.HasPrefix(l, "  word")) {
			t.Errorf("line %d %q", i, l)
		}
	}
	if got := WrapLines("short\n  "+strings.Repeat("x ", 30)+"\n", 20); !strings.HasPrefix(got, "short\n  x x") || strings.Count(got, "\n") < 4 {
		t.Errorf("WrapLines:\n%s", got)
	}
}
