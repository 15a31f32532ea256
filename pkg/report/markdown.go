package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/cnibench/cnibench/pkg/stages"
)

// writeMarkdown prints the document as GitHub-flavoured markdown: the
// runs, the answer, the hosts and arms, one table each (no split by
// size), warnings, and footnotes for missing values.
func writeMarkdown(w io.Writer, d *Document) error {
	var b strings.Builder
	single := len(d.Runs) == 1 && d.Runs[0].Tag == ""
	if single {
		fmt.Fprintf(&b, "### %s\n\n", mdEscape(d.Runs[0].Line))
	} else {
		if d.Runs[0].Tag == "" { // a comparison's A and B need no heading
			b.WriteString("### Runs side by side\n\n")
		}
		for _, r := range d.Runs {
			tag := ""
			if r.Tag != "" {
				tag = "**" + r.Tag + "**: "
			}
			fmt.Fprintf(&b, "- %s%s\n", tag, mdEscape(r.Line))
		}
		b.WriteString("\n")
	}
	if len(d.Answers) > 0 {
		fmt.Fprintf(&b, "**%s**\n\n", mdEscape(strings.TrimSuffix(d.AnswerHeading, ":")))
		for _, a := range d.Answers {
			fmt.Fprintf(&b, "- %s\n", mdEscape(a.String()))
		}
		b.WriteString("\n")
	}
	for _, r := range d.Runs {
		who := ""
		if name := d.runName(r); name != "" {
			who = "**" + name + "**: "
		}
		fmt.Fprintf(&b, "%s%s  \n", who, mdEscape(r.Fingerprint))
		if r.IdleWakeup != "" {
			fmt.Fprintf(&b, "%s  \n", mdEscape(r.IdleWakeup))
		}
		if r.Conditions != "" {
			fmt.Fprintf(&b, "every arm: %s  \n", mdEscape(r.Conditions))
		}
		b.WriteString("\n")
		if single {
			for _, l := range r.Arms {
				fmt.Fprintf(&b, "- %s\n", mdEscape(l))
			}
			if len(r.Arms) > 0 {
				b.WriteString("\n")
			}
		}
	}
	mdTable(&b, d.Main)
	for _, l := range d.Legend {
		fmt.Fprintf(&b, "\n%s\n", mdEscape(l))
	}
	if v := d.Verdicts; v != nil {
		fmt.Fprintf(&b, "\nEach arm against **%s** (%s):\n\n", mdEscape(v.Baseline), v.Method)
		mdTable(&b, v.Table)
		for _, l := range v.Notes {
			fmt.Fprintf(&b, "\n%s\n", mdEscape(l))
		}
	}
	if len(d.Warnings) > 0 {
		b.WriteString("\n**Warnings**\n\n")
		for _, s := range d.warningTexts() {
			fmt.Fprintf(&b, "- ⚠ %s\n", mdEscape(s))
		}
	}
	// CPU by stage is a fixed-width text table: fenced, it keeps its columns.
	for _, st := range d.Stages {
		b.WriteString("\n```\n")
		st.WriteText(&b)
		b.WriteString("```\n")
	}
	if sc := d.StagesCompared; sc != nil {
		fmt.Fprintf(&b, "\n%s\n```\n", sc.Heading)
		stages.WriteText(&b, sc.Explanations)
		b.WriteString("```\n")
	}
	if len(d.Notes) > 0 {
		b.WriteString("\n")
		for i, t := range d.Notes {
			fmt.Fprintf(&b, "[^%d]: %s\n", i+1, mdEscape(t))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdTable(b *strings.Builder, g Table) {
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
			t := mdEscape(c.String())
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
