package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/termtable"
)

// writeText prints the document for a terminal TextWidth columns wide:
// each run's line, then the answer (one line per comparison), then the
// hosts and how the arms were measured, then aligned tables, one per
// message size where there are several, each fitted to the width
// (pkg/termtable), and prose wrapped.
func writeText(w io.Writer, d *Document) error {
	var b strings.Builder
	for _, r := range d.Runs {
		prefix := ""
		if r.Tag != "" {
			prefix = r.Tag + ": "
		}
		fmt.Fprintln(&b, termtable.Wrap(prefix+r.Line, TextWidth, strings.Repeat(" ", len(prefix)+4)))
	}
	if len(d.Answers) > 0 {
		fmt.Fprintln(&b)
		fmt.Fprintln(&b, termtable.Wrap(d.AnswerHeading, TextWidth, ""))
		for _, a := range d.Answers {
			fmt.Fprintln(&b, termtable.Wrap("  "+a.String(), TextWidth, "      "))
		}
	}
	fmt.Fprintln(&b)
	for _, r := range d.Runs {
		// Several runs: each run's details under its tag or id.
		lead := "  "
		if name := d.runName(r); name != "" {
			lead += name + ": "
		}
		indent := strings.Repeat(" ", len(lead))
		fmt.Fprintln(&b, termtable.Wrap(lead+r.Fingerprint, TextWidth, indent+"  "))
		if r.IdleWakeup != "" {
			fmt.Fprintln(&b, termtable.Wrap(indent+r.IdleWakeup, TextWidth, indent+"  "))
		}
		if r.Conditions != "" {
			fmt.Fprintln(&b, termtable.Wrap(indent+"every arm: "+r.Conditions, TextWidth, indent+"  "))
		}
		if len(d.Runs) == 1 {
			for _, l := range r.Arms {
				fmt.Fprintln(&b, termtable.Wrap("  arm "+l, TextWidth, "      "))
			}
		}
	}
	fmt.Fprintln(&b)
	textTables(&b, d.Main)
	for _, l := range d.Legend {
		fmt.Fprintln(&b, termtable.Wrap(l, TextWidth, ""))
	}
	if v := d.Verdicts; v != nil {
		fmt.Fprintf(&b, "\n%s\n", termtable.Wrap(fmt.Sprintf("Each arm against %s (%s):", v.Baseline, v.Method), TextWidth, ""))
		textTables(&b, v.Table)
		for _, l := range v.Notes {
			fmt.Fprintln(&b, termtable.Wrap(l, TextWidth, ""))
		}
	}
	if len(d.Notes) > 0 {
		fmt.Fprintln(&b, "\nNotes:")
		for i, t := range d.Notes {
			fmt.Fprintln(&b, termtable.Wrap(fmt.Sprintf("  [%d] %s", i+1, t), TextWidth, "      "))
		}
	}
	if len(d.Warnings) > 0 {
		fmt.Fprintln(&b, "\nWarnings:")
		for _, s := range d.warningTexts() {
			fmt.Fprintln(&b, termtable.Wrap("  ! "+s, TextWidth, "    "))
		}
	}
	// CPU by stage is printed by pkg/stages; its prose lines are wrapped
	// here, its aligned rows are narrower than a terminal already.
	for _, st := range d.Stages {
		var s strings.Builder
		st.WriteText(&s)
		fmt.Fprint(&b, "\n"+termtable.WrapLines(s.String(), TextWidth))
	}
	if sc := d.StagesCompared; sc != nil {
		var s strings.Builder
		stages.WriteText(&s, sc.Explanations)
		fmt.Fprintf(&b, "\n%s\n%s", termtable.Wrap(sc.Heading, TextWidth, ""), termtable.WrapLines(s.String(), TextWidth))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// textTables prints a table, or one per message size with a title line
// when its value columns have several, each fitted to TextWidth columns
// (wrapped cells, value columns dealt over several tables).
func textTables(b *strings.Builder, t Table) {
	for _, part := range splitBySize(withoutStated(t)) {
		if part.title != "" {
			fmt.Fprintln(b, part.title)
		}
		b.WriteString(termtable.Render(termCells(part.t), TextWidth, termtable.Boxed))
	}
}

// withoutStated drops the label columns the page states elsewhere.
func withoutStated(t Table) Table {
	if len(t.Stated) == 0 {
		return t
	}
	keep := func(i int) bool { return i >= len(t.Stated) || !t.Stated[i] }
	out := Table{Sizes: t.Sizes}
	for i, h := range t.Header {
		if keep(i) {
			out.Header = append(out.Header, h)
			out.Right = append(out.Right, t.right(i))
			if i < t.LabelCols {
				out.LabelCols++
			}
		}
	}
	for _, r := range t.Rows {
		var row []TableCell
		for i, c := range r {
			if keep(i) {
				row = append(row, c)
			}
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

type titledTable struct {
	title string
	t     Table
}

// splitBySize cuts a table with several message sizes into one table per
// size, as the Kube-OVN document prints them: twelve value columns do not
// fit a terminal. Markdown, HTML and CSV keep one table.
func splitBySize(t Table) []titledTable {
	var sizes []int
	seen := map[int]bool{}
	for _, s := range t.Sizes {
		if !seen[s] {
			seen[s] = true
			sizes = append(sizes, s)
		}
	}
	if len(sizes) < 2 {
		return []titledTable{{"", t}}
	}
	sort.Ints(sizes)
	var out []titledTable
	for _, size := range sizes {
		keep := make([]int, 0, len(t.Header))
		for i := 0; i < t.LabelCols; i++ {
			keep = append(keep, i)
		}
		for i, s := range t.Sizes {
			if s == size {
				keep = append(keep, t.LabelCols+i)
			}
		}
		sub := Table{LabelCols: t.LabelCols}
		for _, i := range keep {
			sub.Header = append(sub.Header, t.Header[i])
			sub.Right = append(sub.Right, t.right(i))
		}
		for _, r := range t.Rows {
			var row []TableCell
			for _, i := range keep {
				row = append(row, r[i])
			}
			sub.Rows = append(sub.Rows, row)
		}
		out = append(out, titledTable{"Message size " + FormatSize(size) + ":", sub})
	}
	return out
}
