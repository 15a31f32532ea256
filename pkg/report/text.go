package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// writeText prints the document for a terminal: aligned tables
// (go-pretty), one per message size where there are several, and lines
// wrapped at 100 columns.
func writeText(w io.Writer, d *Document) error {
	var b strings.Builder
	for _, r := range d.Runs {
		prefix, indent := "", "  "
		if r.Tag != "" {
			prefix = r.Tag + ": "
			indent = strings.Repeat(" ", len(prefix))
		}
		fmt.Fprintln(&b, prefix+r.Line)
		fmt.Fprintln(&b, indent+r.Fingerprint)
		if len(d.Runs) == 1 {
			for _, l := range r.Arms {
				fmt.Fprintln(&b, "  arm "+l)
			}
		}
	}
	fmt.Fprintln(&b)
	textTables(&b, d.Main)
	for _, l := range d.Legend {
		fmt.Fprintln(&b, wrap(l, 100, ""))
	}
	if v := d.Verdicts; v != nil {
		fmt.Fprintf(&b, "\nEach arm against %s (%s):\n", v.Baseline, v.Method)
		textTables(&b, v.Table)
		for _, l := range v.Notes {
			fmt.Fprintln(&b, wrap(l, 100, ""))
		}
	}
	if len(d.Notes) > 0 {
		fmt.Fprintln(&b, "\nNotes:")
		for i, t := range d.Notes {
			fmt.Fprintln(&b, wrap(fmt.Sprintf("  [%d] %s", i+1, t), 100, "      "))
		}
	}
	if len(d.Warnings) > 0 {
		fmt.Fprintln(&b, "\nWarnings:")
		for _, s := range d.warningTexts() {
			fmt.Fprintln(&b, wrap("  ! "+s, 100, "    "))
		}
	}
	for _, st := range d.Stages {
		fmt.Fprintln(&b)
		st.WriteText(&b)
	}
	if sc := d.StagesCompared; sc != nil {
		fmt.Fprintf(&b, "\n%s\n", sc.Heading)
		stages.WriteText(&b, sc.Explanations)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// textTables prints a table, or one per message size with a title line
// when its value columns have several.
func textTables(b *strings.Builder, t Table) {
	for _, part := range splitBySize(t) {
		if part.title != "" {
			fmt.Fprintln(b, part.title)
		}
		b.WriteString(textTable(part.t))
	}
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
		sub := Table{}
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

// textTable draws a table with go-pretty; a cell's footnote is "[N]" after it.
func textTable(g Table) string {
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
			if c.Note > 0 {
				row = append(row, fmt.Sprintf("%s [%d]", c, c.Note))
			} else {
				row = append(row, c.String())
			}
		}
		t.AppendRow(row)
	}
	// Numbers read best right-aligned; the label columns stay left.
	var cfg []table.ColumnConfig
	for i := range g.Header {
		if g.right(i) {
			cfg = append(cfg, table.ColumnConfig{Number: i + 1, Align: text.AlignRight, AlignHeader: text.AlignRight})
		}
	}
	t.SetColumnConfigs(cfg)
	t.Style().Format.Header = text.FormatDefault
	return t.Render() + "\n"
}

// wrap breaks long lines at spaces so notes stay readable in a terminal.
func wrap(s string, width int, indent string) string {
	words := strings.Fields(s)
	lead := s[:len(s)-len(strings.TrimLeft(s, " "))]
	var b strings.Builder
	line := lead
	for _, w := range words {
		if len(line) > len(lead) && len(line)+1+len(w) > width {
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
