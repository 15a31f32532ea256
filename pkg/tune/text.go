package tune

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/cnibench/cnibench/pkg/termtable"
)

// writeJSON writes v as one indented JSON document, as every --json does.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// AuditWidth is the terminal width `tune audit` fits its table to.
const AuditWidth = 100

// WriteFindings prints an audit as a table no wider than AuditWidth:
// long values wrap inside their column, each recommendation's source is a
// letter after it ([a]) and each finding's note (why it differs or could
// not be read) a number after its status ([1]), both spelled out below
// the table; withProfile adds the profile column (an audit against both
// profiles).
func WriteFindings(w io.Writer, fs []Finding, withProfile bool) error {
	hdr := []string{"KNOB", "TARGET", "CURRENT", "RECOMMENDED [SOURCE]", "STATUS [NOTE]"}
	t := termtable.Table{Labels: 1}
	if withProfile {
		hdr, t.Labels = append([]string{"PROFILE"}, hdr...), 2
	}
	for _, h := range hdr {
		t.Header = append(t.Header, termtable.Words(h))
	}
	var notes, sources termtable.Footnotes
	for _, f := range fs {
		status := termtable.Words(string(f.Status))
		if f.Status != StatusOK && f.Why != "" {
			status = append(status, fmt.Sprintf("[%d]", notes.Add(f.Why)))
		}
		rec := termtable.SoftWords(dash(f.Recommended))
		if f.Source != "" {
			rec = append(rec, "["+sourceKey(sources.Add(f.Source))+"]")
		}
		row := []termtable.Cell{{f.Knob}, termtable.SoftWords(dash(nsTarget(f.Netns, f.Target))), termtable.SoftWords(dash(f.Current)),
			rec, status}
		if withProfile {
			row = append([]termtable.Cell{{string(f.Profile)}}, row...)
		}
		t.Rows = append(t.Rows, row)
	}
	if err := writePlain(w, t, AuditWidth); err != nil {
		return err
	}
	var b strings.Builder
	if len(sources.List) > 0 {
		b.WriteString("\nSources:\n")
		for i, s := range sources.List {
			fmt.Fprintln(&b, termtable.Wrap(fmt.Sprintf("  [%s] %s", sourceKey(i+1), s), AuditWidth, "      "))
		}
	}
	if len(notes.List) > 0 {
		b.WriteString("\nNotes:\n")
		for i, n := range notes.List {
			fmt.Fprintln(&b, termtable.Wrap(fmt.Sprintf("  [%d] %s", i+1, n), AuditWidth, "      "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sourceKey names the i-th source (from 1): a, b, …, z, aa, ab, …
func sourceKey(i int) string {
	s := ""
	for i > 0 {
		i--
		s = string(rune('a'+i%26)) + s
		i /= 26
	}
	return s
}

// nsTarget names a target inside a namespace as netns:target.
func nsTarget(ns, target string) string {
	switch {
	case ns == "":
		return target
	case target == "":
		return ns
	}
	return ns + ":" + target
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteApply prints what an apply changed (or, dry, would change), what
// failed and what it skipped, then where its journal is.
func WriteApply(w io.Writer, rep *ApplyReport, dry bool) {
	verb := "changed"
	if dry {
		verb = "would change"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "KNOB\tTARGET\tOLD\tNEW\tRESULT\n")
	for _, c := range rep.Changes {
		res := verb
		if c.Error != "" {
			res = "FAILED: " + c.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Knob, dash(nsTarget(c.Netns, c.Target)), c.Old, c.New, res)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(tw, "%s\t%s\t\t\tskipped: %s\n", s.Knob, dash(nsTarget(s.Netns, s.Target)), s.Reason)
	}
	tw.Flush()
	switch {
	case rep.Journal != "":
		fmt.Fprintf(w, "journal: %s (undo with `cnibench tune rollback`)\n", rep.Journal)
	case len(rep.Changes) == 0:
		fmt.Fprintln(w, "nothing to change")
	}
}

// WriteChanges lists journal entries: setting, where, old -> new.
func WriteChanges(w io.Writer, cs []Entry, indent string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range cs {
		where := "host"
		if c.Netns != "" {
			where = "netns " + c.Netns
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s -> %s\n", indent, c.Knob, c.Target, where, c.ShownOld(), c.New)
	}
	tw.Flush()
}

// WriteJournals lists apply journals (rolled-back ones only with all) and
// returns how many it listed.
func WriteJournals(w io.Writer, js []JournalInfo, all bool) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOURNAL\tSTARTED\tPROFILE\tSCOPE\tCHANGES\tFAILED\tUNFINISHED\tSTATE")
	n := 0
	for _, j := range js {
		if j.RolledBack && !all {
			continue
		}
		n++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", j.Path, j.Started.Format("2006-01-02 15:04:05Z"),
			j.Profile, j.Scope, j.Changes, j.Failed, j.Unfinished, j.State())
	}
	tw.Flush()
	return n
}

// KnobRow is one knob of `tune knobs`: what it reads and writes, its scope,
// each profile's value and where that comes from.
type KnobRow struct {
	ID, Title, Scope, Access, Latency, Throughput, Source, Risk string
	AuditOnly                                                   bool
}

// KnobRows lists the registry.
func KnobRows() []KnobRow {
	var rows []KnobRow
	for _, k := range Knobs() {
		r := KnobRow{ID: k.ID, Title: k.Title, Scope: string(k.Scope), Access: k.Access, Risk: k.Risk, AuditOnly: k.AuditOnly}
		var srcs []string
		if rec, ok := k.Recs[Latency]; ok {
			r.Latency, srcs = rec.Value, append(srcs, rec.Source)
		}
		if rec, ok := k.Recs[Throughput]; ok {
			r.Throughput = rec.Value
			if len(srcs) == 0 || srcs[0] != rec.Source {
				srcs = append(srcs, rec.Source)
			}
		}
		if len(srcs) == 0 {
			srcs = []string{k.Source}
		}
		r.Source = strings.Join(srcs, "; ")
		rows = append(rows, r)
	}
	return rows
}

// WriteKnobs prints the registry as a Markdown table (docs/tuning.md) or a
// terminal table.
func WriteKnobs(w io.Writer, rows []KnobRow, markdown bool) error {
	if markdown {
		fmt.Fprintln(w, "| id | what | reads/writes | scope | latency | throughput | source | risk |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
		for _, r := range rows {
			ao := ""
			if r.AuditOnly {
				ao = " (audit only)"
			}
			fmt.Fprintf(w, "| `%s` | %s%s | %s | %s | %s | %s | %s | %s |\n", r.ID, r.Title, ao,
				strings.ReplaceAll(r.Access, "|", "\\|"), r.Scope, dash(r.Latency), dash(r.Throughput), r.Source, r.Risk)
		}
		return nil
	}
	t := termtable.Table{Labels: 1}
	for _, h := range []string{"ID", "SCOPE", "LATENCY", "THROUGHPUT", "READS/WRITES"} {
		t.Header = append(t.Header, termtable.Cell{h})
	}
	for _, r := range rows {
		t.Rows = append(t.Rows, []termtable.Cell{{r.ID}, {string(r.Scope)}, termtable.SoftWords(dash(r.Latency)),
			termtable.SoftWords(dash(r.Throughput)), termtable.SoftWords(r.Access)})
	}
	return writePlain(w, t, AuditWidth)
}

// writePlain prints a table fitted to width, borderless, as tabwriter
// would print it.
func writePlain(w io.Writer, t termtable.Table, width int) error {
	_, err := io.WriteString(w, termtable.Render(t, width, termtable.Plain))
	return err
}

// ShownOld is the old value as `tune status` shows it: for offloads only
// the features the change set (the entry keeps them all, for rollback).
func (e Entry) ShownOld() string {
	if e.Knob != KindOffloads {
		return strings.TrimSpace(e.Old)
	}
	old, err1 := parseFeatures(e.Old)
	set, err2 := parseFeatures(e.New)
	if err1 != nil || err2 != nil {
		return e.Old
	}
	shown := map[string]bool{}
	for f := range set {
		if on, ok := old[f]; ok {
			shown[f] = on
		}
	}
	return formatFeatures(shown)
}
