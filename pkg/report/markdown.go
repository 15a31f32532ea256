package report

import (
	"fmt"
	"io"
	"strings"
)

// writeMarkdown renders GitHub-flavoured markdown: the document-shaped
// table, the verdicts against the baseline, and footnotes for missing values.
func writeMarkdown(w io.Writer, models []*Model) error {
	var b strings.Builder
	var n notes
	if len(models) == 1 {
		m := models[0]
		fmt.Fprintf(&b, "### %s\n\n", mdEscape(runLine(m.Run)))
		fmt.Fprintf(&b, "%s\n\n", mdEscape(fingerprintLine(m.Run.Host)))
		for _, l := range armLines(m) {
			fmt.Fprintf(&b, "- %s\n", mdEscape(l))
		}
		if len(m.Run.Arms) > 0 {
			b.WriteString("\n")
		}
	} else {
		b.WriteString("### Runs side by side\n\n")
		for _, m := range models {
			fmt.Fprintf(&b, "- %s  \n  %s\n", mdEscape(runLine(m.Run)), mdEscape(fingerprintLine(m.Run.Host)))
		}
		b.WriteString("\n")
	}
	g, cols := mainGrid(models, &n)
	mdTable(&b, g)
	for _, l := range legend(models, cols) {
		fmt.Fprintf(&b, "\n%s\n", mdEscape(l))
	}
	if len(models) == 1 {
		if vg, ok := verdictGrid(models[0]); ok {
			fmt.Fprintf(&b, "\nEach arm against **%s** (Mann–Whitney U, two-sided, α=0.05; n.s. = no significant difference):\n\n", mdEscape(models[0].Baseline))
			mdTable(&b, vg)
			for _, l := range verdictNotes(models[0]) {
				fmt.Fprintf(&b, "\n%s\n", mdEscape(l))
			}
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
		b.WriteString("\n**Warnings**\n\n")
		for _, s := range warn {
			fmt.Fprintf(&b, "- ⚠ %s\n", mdEscape(s))
		}
	}
	if len(n.list) > 0 {
		b.WriteString("\n")
		for i, t := range n.list {
			fmt.Fprintf(&b, "[^%d]: %s\n", i+1, mdEscape(t))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdTable(b *strings.Builder, g grid) {
	b.WriteString("|")
	for _, h := range g.Header {
		b.WriteString(" " + mdEscape(h) + " |")
	}
	b.WriteString("\n|")
	for i := range g.Header {
		if g.right(i) {
			b.WriteString(" ---: |")
		} else {
			b.WriteString(" --- |")
		}
	}
	b.WriteString("\n")
	for _, r := range g.Rows {
		b.WriteString("|")
		for _, c := range r {
			t := mdEscape(c.Text)
			if c.Note > 0 {
				t += fmt.Sprintf("[^%d]", c.Note)
			}
			b.WriteString(" " + t + " |")
		}
		b.WriteString("\n")
	}
}

// mdEscape keeps user-supplied text (arm names, reasons) from breaking a
// table or injecting HTML.
func mdEscape(s string) string {
	r := strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;")
	return r.Replace(s)
}
