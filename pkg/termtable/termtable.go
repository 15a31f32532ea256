// Package termtable lays tables and prose out for a terminal of a given
// width: cells wrapped inside their columns, columns dealt over several
// tables when they cannot all fit, and long lines broken at spaces. It
// knows nothing of what the cells mean: the caller cuts each cell into
// units, the pieces that must never be broken (a value with its interval,
// one flag, one word), and this package decides where lines end.
//
// go-pretty draws the boxed tables; the width rules here, which it does not
// have (shrink the widest column first, never below its widest unit, deal
// the rest into another table), are the product's own.
package termtable

import (
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// Width is how many terminal columns s takes: µ, ±, × and — take one
// each, not their bytes.
func Width(s string) int { return text.StringWidthWithoutEscSequences(s) }

// Joiner starts a unit that continues the previous unit's word (a soft
// break inside a long word): on one line the two join without a space.
const Joiner = "\x00"

// A Cell is a cell's units, in order.
type Cell []string

// Words is text cut at its spaces: each word a unit.
func Words(s string) Cell { return strings.Fields(s) }

// SoftWords is Words with every word longer than 12 columns also cut
// after each '-' or '/' inside it (a kernel release, a run name), the
// pieces joined again when they share a line.
func SoftWords(s string) Cell {
	var out Cell
	for _, w := range strings.Fields(s) {
		out = append(out, softBreaks(w)...)
	}
	return out
}

func softBreaks(w string) []string {
	const long = 12
	if Width(w) <= long {
		return []string{w}
	}
	var out []string
	start := 0
	for i, r := range w {
		if (r == '-' || r == '/') && i > start && i < len(w)-1 {
			out = append(out, w[start:i+1])
			start = i + 1
		}
	}
	out = append(out, w[start:])
	for i := 1; i < len(out); i++ {
		out[i] = Joiner + out[i]
	}
	return out
}

// Table is a table of cells. Its first Labels columns name the rows and
// are repeated in every table the others are dealt into; Right marks the
// columns aligned right (numbers).
type Table struct {
	Header []Cell
	Rows   [][]Cell
	Right  []bool
	Labels int
}

// Grid is a table laid out: each cell's lines joined by "\n".
type Grid struct {
	Header []string
	Rows   [][]string
	Right  []bool
}

// Style is how a grid is drawn, which decides how wide its columns may be.
type Style int

// Styles.
const (
	// Boxed draws borders (go-pretty's light style): one column for the
	// left border and three per column.
	Boxed Style = iota
	// Plain separates columns by two spaces, with no borders.
	Plain
)

// drawn is the width of a table with these column widths.
func (s Style) drawn(widths []int) int {
	w := 0
	for _, c := range widths {
		w += c
	}
	if s == Plain {
		return w + 2*max(0, len(widths)-1)
	}
	return 1 + w + 3*len(widths)
}

// Fit lays t out for a terminal width columns wide, drawn in style: each
// column at its natural width if the table fits, else every column capped
// at the same width (the widest shrink first), never below its widest
// unit. When even the narrowest layout does not fit, the columns after
// the labels are dealt, in order and balanced, into as few tables as fit,
// each repeating the label columns.
func Fit(t Table, width int, style Style) []Grid {
	n := len(t.Header)
	all := append([][]Cell{t.Header}, t.Rows...)
	minW, natW := make([]int, n), make([]int, n)
	for _, row := range all {
		for i, c := range row {
			for _, u := range c {
				minW[i] = max(minW[i], Width(strings.TrimPrefix(u, Joiner)))
			}
			natW[i] = max(natW[i], Width(fill(c, 1<<30)))
		}
	}
	labels := make([]int, 0, n)
	for i := 0; i < t.Labels && i < n; i++ {
		labels = append(labels, i)
	}
	var values []int
	for i := len(labels); i < n; i++ {
		values = append(values, i)
	}
	var out []Grid
	for _, chunk := range deal(labels, values, minW, width, style) {
		cols := append(append([]int(nil), labels...), chunk...)
		ws := widths(t, cols, minW, natW, width, style)
		var g Grid
		for k, i := range cols {
			g.Header = append(g.Header, fill(t.Header[i], ws[k]))
			g.Right = append(g.Right, i < len(t.Right) && t.Right[i])
		}
		for _, r := range t.Rows {
			var row []string
			for k, i := range cols {
				row = append(row, fill(r[i], ws[k]))
			}
			g.Rows = append(g.Rows, row)
		}
		out = append(out, g)
	}
	return out
}

// deal splits the value columns into the fewest consecutive groups whose
// narrowest layout, beside the label columns, fits width; balanced, so
// that two tables hold three and three columns rather than five and one.
func deal(labels, values []int, minW []int, width int, style Style) [][]int {
	if len(values) == 0 {
		return [][]int{nil}
	}
	fits := func(cols []int) bool {
		var ws []int
		for _, i := range append(append([]int(nil), labels...), cols...) {
			ws = append(ws, minW[i])
		}
		return style.drawn(ws) <= width
	}
	for k := 1; k < len(values); k++ {
		chunks := balanced(values, k)
		ok := true
		for _, c := range chunks {
			ok = ok && fits(c)
		}
		if ok {
			return chunks
		}
	}
	return balanced(values, len(values)) // one value column per table: the narrowest there is
}

// balanced cuts cols into k consecutive groups whose sizes differ by one
// at most, the larger first.
func balanced(cols []int, k int) [][]int {
	var out [][]int
	for i, start := 0, 0; i < k; i++ {
		size := len(cols) / k
		if i < len(cols)%k {
			size++
		}
		out = append(out, cols[start:start+size])
		start += size
	}
	return out
}

// widths gives each column its natural width, or, where the table would
// be wider than width, narrows the columns one step at a time, each step
// taking a column from where it costs the fewest extra lines — counting
// a row's height as its tallest cell's, so a cell that wraps beside an
// already tall one is free — and, on a tie, from the widest column. No
// column goes below its widest unit (deal made that layout fit).
func widths(t Table, cols []int, minW, natW []int, width int, style Style) []int {
	ws := make([]int, len(cols))
	for k, i := range cols {
		ws[k] = natW[i]
	}
	if style.drawn(ws) <= width {
		return ws
	}
	rows := append([][]Cell{t.Header}, t.Rows...)
	// lines[r][k][w-minW] is how many lines row r's cell in column k
	// takes at width w.
	lines := make([][][]int, len(rows))
	for r, row := range rows {
		lines[r] = make([][]int, len(cols))
		for k, i := range cols {
			for w := minW[i]; w <= natW[i]; w++ {
				lines[r][k] = append(lines[r][k], strings.Count(fill(row[i], w), "\n")+1)
			}
		}
	}
	height := func(narrowed int) int {
		h := 0
		for r := range rows {
			tallest := 0
			for k, i := range cols {
				w := ws[k]
				if k == narrowed {
					w--
				}
				tallest = max(tallest, lines[r][k][w-minW[i]])
			}
			h += tallest
		}
		return h
	}
	for style.drawn(ws) > width {
		best, bestH := -1, 0
		for k, i := range cols {
			if ws[k] <= minW[i] {
				continue
			}
			h := height(k)
			if best < 0 || h < bestH || (h == bestH && ws[k] > ws[best]) {
				best, bestH = k, h
			}
		}
		if best < 0 {
			break // every column at its narrowest: wider than width, as deal allowed
		}
		ws[best]--
	}
	return ws
}

// fill puts a cell's units on lines of at most width columns, greedily.
func fill(c Cell, width int) string {
	var lines []string
	line := ""
	for _, u := range c {
		sep := " "
		if strings.HasPrefix(u, Joiner) {
			u, sep = u[len(Joiner):], ""
		}
		switch {
		case line == "":
			line = u
		case Width(line)+len(sep)+Width(u) <= width:
			line += sep + u
		default:
			lines = append(lines, line)
			line = u
		}
	}
	return strings.Join(append(lines, line), "\n")
}

// Draw draws a grid: Boxed with go-pretty's light borders, Plain as
// columns two spaces apart under an unmarked header. Every line of a
// cell is aligned as its column is.
func (g Grid) Draw(style Style) string {
	if style == Plain {
		return g.plain()
	}
	t := table.NewWriter()
	t.SetStyle(table.StyleLight)
	hdr := table.Row{}
	for _, h := range g.Header {
		hdr = append(hdr, h)
	}
	t.AppendHeader(hdr)
	for _, r := range g.Rows {
		row := table.Row{}
		for _, c := range r {
			row = append(row, c)
		}
		t.AppendRow(row)
	}
	var cfg []table.ColumnConfig
	for i, right := range g.Right {
		if right {
			cfg = append(cfg, table.ColumnConfig{Number: i + 1, Align: text.AlignRight, AlignHeader: text.AlignRight})
		}
	}
	t.SetColumnConfigs(cfg)
	t.Style().Format.Header = text.FormatDefault
	return t.Render() + "\n"
}

// plain draws the grid without borders, as text/tabwriter would with a
// padding of two, but with cells of several lines.
func (g Grid) plain() string {
	ws := make([]int, len(g.Header))
	rows := append([][]string{g.Header}, g.Rows...)
	for _, r := range rows {
		for i, c := range r {
			for _, l := range strings.Split(c, "\n") {
				ws[i] = max(ws[i], Width(l))
			}
		}
	}
	var b strings.Builder
	for _, r := range rows {
		lines := make([][]string, len(r))
		height := 0
		for i, c := range r {
			lines[i] = strings.Split(c, "\n")
			height = max(height, len(lines[i]))
		}
		for k := 0; k < height; k++ {
			var line strings.Builder
			for i := range r {
				s := ""
				if k < len(lines[i]) {
					s = lines[i][k]
				}
				pad := strings.Repeat(" ", ws[i]-Width(s))
				if i < len(g.Right) && g.Right[i] {
					s = pad + s
				} else if i < len(r)-1 {
					s += pad
				}
				if i > 0 {
					line.WriteString("  ")
				}
				line.WriteString(s)
			}
			b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
		}
	}
	return b.String()
}

// Render fits t to width and draws it: one table, or the tables its
// columns were dealt into, plain ones a blank line apart.
func Render(t Table, width int, style Style) string {
	var b strings.Builder
	for i, g := range Fit(t, width, style) {
		if i > 0 && style == Plain {
			b.WriteString("\n")
		}
		b.WriteString(g.Draw(style))
	}
	return b.String()
}

// Footnotes numbers distinct texts from 1, in order of first use: the
// notes that a table's cells point at ("[3]") and a page lists under it.
type Footnotes struct {
	List []string
	idx  map[string]int
}

// Add returns text's number, numbering it if it is new.
func (n *Footnotes) Add(text string) int {
	if n.idx == nil {
		n.idx = map[string]int{}
	}
	if i, ok := n.idx[text]; ok {
		return i
	}
	n.List = append(n.List, text)
	n.idx[text] = len(n.List)
	return len(n.List)
}

// Wrap breaks s at spaces into lines of at most width columns, the first
// keeping s's own indentation and the others starting with indent. A word
// wider than a line stays whole.
func Wrap(s string, width int, indent string) string {
	words := strings.Fields(s)
	lead := s[:len(s)-len(strings.TrimLeft(s, " "))]
	var b strings.Builder
	line := lead
	for _, w := range words {
		if len(line) > len(lead) && Width(line)+1+Width(w) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != lead && line != indent {
			line += " "
		}
		line += w
	}
	b.WriteString(line)
	return b.String()
}

// WrapLines wraps every line of s wider than width, each continuation
// indented four columns past the line's own indentation; the others are
// left as they are (aligned rows, tables).
func WrapLines(s string, width int) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		body := strings.TrimSuffix(l, "\n")
		if Width(body) <= width {
			b.WriteString(l)
			continue
		}
		lead := body[:len(body)-len(strings.TrimLeft(body, " "))]
		b.WriteString(Wrap(body, width, lead+"    "))
		if strings.HasSuffix(l, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}
