package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// writeText renders the terminal report: aligned tables with go-pretty.
func writeText(w io.Writer, models []*Model) error {
	var b strings.Builder
	var n notes
	for _, m := range models {
		fmt.Fprintln(&b, runLine(m.Run))
		fmt.Fprintln(&b, "  "+fingerprintLine(m.Run.Host))
		if len(models) == 1 {
			for _, l := range armLines(m) {
				fmt.Fprintln(&b, "  arm "+l)
			}
		}
	}
	fmt.Fprintln(&b)
	g, cols := mainGrid(models, &n)
	labelCols := len(g.Header) - len(cols)
	withNote := func(c gcell) string {
		if c.Note > 0 {
			return fmt.Sprintf("%s [%d]", c.Text, c.Note)
		}
		return c.Text
	}
	for _, part := range splitBySize(g, cols, labelCols) {
		if part.title != "" {
			fmt.Fprintln(&b, part.title)
		}
		b.WriteString(textTable(part.g, withNote))
	}
	for _, l := range legend(models, cols) {
		fmt.Fprintln(&b, wrap(l, 100, ""))
	}
	if len(models) == 1 {
		if vg, ok := verdictGrid(models[0]); ok {
			fmt.Fprintf(&b, "\nEach arm against %s (Mann–Whitney U, two-sided, α=%.2g; n.s. = no significant difference):\n", models[0].Baseline, 0.05)
			for _, part := range splitBySize(vg, models[0].Columns, 1) {
				if part.title != "" {
					fmt.Fprintln(&b, part.title)
				}
				b.WriteString(textTable(part.g, withNote))
			}
			for _, l := range verdictNotes(models[0]) {
				fmt.Fprintln(&b, wrap(l, 100, ""))
			}
		}
	}
	if len(n.list) > 0 {
		fmt.Fprintln(&b, "\nNotes:")
		for i, t := range n.list {
			fmt.Fprintln(&b, wrap(fmt.Sprintf("  [%d] %s", i+1, t), 100, "      "))
		}
	}
	var warn []string
	for _, m := range models {
		for _, f := range m.Flags {
			s := f.Message
			if len(models) > 1 {
				s = fmt.Sprintf("run %d: %s", m.Run.ID, s)
			}
			warn = append(warn, s)
		}
	}
	if len(warn) > 0 {
		fmt.Fprintln(&b, "\nWarnings:")
		for _, s := range warn {
			fmt.Fprintln(&b, wrap("  ! "+s, 100, "    "))
		}
	}
	for _, m := range models {
		if m.Stages != nil {
			fmt.Fprintln(&b)
			m.Stages.WriteText(&b)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type titledGrid struct {
	title string
	g     grid
}

// splitBySize cuts a table with several message sizes into one table per
// size, as the Kube-OVN document prints them: twelve value columns do not
// fit a terminal. Markdown, HTML and CSV keep one table.
func splitBySize(g grid, cols []Column, labelCols int) []titledGrid {
	var sizes []int
	seen := map[int]bool{}
	for _, c := range cols {
		if !seen[c.Size] {
			seen[c.Size] = true
			sizes = append(sizes, c.Size)
		}
	}
	if len(sizes) < 2 {
		return []titledGrid{{"", g}}
	}
	sort.Ints(sizes)
	var out []titledGrid
	for _, size := range sizes {
		keep := make([]int, 0, len(g.Header))
		for i := 0; i < labelCols; i++ {
			keep = append(keep, i)
		}
		for i, c := range cols {
			if c.Size == size {
				keep = append(keep, labelCols+i)
			}
		}
		sub := grid{}
		for _, i := range keep {
			sub.Header = append(sub.Header, g.Header[i])
			if g.Right != nil {
				sub.Right = append(sub.Right, g.Right[i])
			}
		}
		for _, r := range g.Rows {
			var row []gcell
			for _, i := range keep {
				row = append(row, r[i])
			}
			sub.Rows = append(sub.Rows, row)
		}
		out = append(out, titledGrid{"Message size " + FormatSize(size) + ":", sub})
	}
	return out
}

func textTable(g grid, cell func(gcell) string) string {
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
			row = append(row, cell(c))
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

// firstValueColumn is the index of the first column holding numbers.
func firstValueColumn(g grid) int {
	for i, h := range g.Header {
		if strings.Contains(h, "(") {
			return i
		}
	}
	return len(g.Header)
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
