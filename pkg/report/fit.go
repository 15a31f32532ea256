package report

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/cnibench/cnibench/pkg/termtable"
)

// TextWidth is the terminal width the text report is laid out for: every
// line of it, tables included, is at most this many columns.
const TextWidth = 100

// termCells is a table as pkg/termtable fits it: each cell cut into the
// units a narrow column may put on separate lines (cellUnits).
func termCells(t Table) termtable.Table {
	out := termtable.Table{Right: t.Right, Labels: t.LabelCols}
	for _, h := range t.Header {
		out.Header = append(out.Header, termtable.Words(h))
	}
	for _, row := range t.Rows {
		var r []termtable.Cell
		for i, c := range row {
			r = append(r, cellUnits(c, i < t.LabelCols))
		}
		out.Rows = append(out.Rows, r)
	}
	return out
}

// cellUnits cuts a cell into the pieces a narrow column may put on
// separate lines: its text's words, glued where a break would mislead
// (see glued), then each flag, then its footnote marker. A label's long
// words may also break after a '-' or '/' (a kernel release, a run name).
func cellUnits(c TableCell, label bool) termtable.Cell {
	var out termtable.Cell
	switch {
	case c.Whole:
		out = termtable.Cell{c.Text}
	case label:
		out = termtable.SoftWords(c.Text)
	default:
		words := strings.Fields(c.Text)
		for i, w := range words {
			if i > 0 && glued(words[i-1], w) {
				out[len(out)-1] += " " + w
				continue
			}
			out = append(out, w)
		}
	}
	for i, f := range c.Flags {
		u := f
		if i == 0 {
			u = "[" + u
		}
		if i == len(c.Flags)-1 {
			u += "]"
		} else {
			u += ","
		}
		out = append(out, u)
	}
	if c.Note > 0 {
		out = append(out, fmt.Sprintf("[%d]", c.Note))
	}
	return out
}

// glued says whether word w must stay on prev's line: an interval or a
// ratio stays with its median ("5.96 ±0.22 ×1.03"), a mode's size with its
// median ("2.30 (n=6) /"), and a number with the word it qualifies
// ("slower 12.8%").
func glued(prev, w string) bool {
	r := []rune(w)
	switch {
	case r[0] == '±' || r[0] == '×' || strings.HasPrefix(w, "(n="):
		return true
	case w == "/":
		return true
	case unicode.IsDigit(r[0]) && prev != "/" && unicode.IsLetter([]rune(prev)[0]):
		return true
	}
	return false
}
