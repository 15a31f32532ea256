package lab

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cnibench/cnibench/pkg/tune"
)

// ParseSets turns `--set key=value` arguments into knobs for Resolve; a
// later value of a key wins. Errors match ErrInvalid.
func ParseSets(sets []string) (map[string]string, error) {
	knobs := map[string]string{}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, invalidError{fmt.Errorf("--set %q: want key=value (knobs: %s)", kv, strings.Join(KnobNames(), ", "))}
		}
		knobs[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return knobs, nil
}

// PresetList is the presets with their one-line help, a line each.
func PresetList() string {
	var b strings.Builder
	for _, p := range Presets() {
		fmt.Fprintf(&b, "  %-18s %s\n", p, PresetHelp(p))
	}
	return b.String()
}

// Help is `cnibench lab --help`'s description: the presets and the knobs' names.
func Help() string {
	return "Build real container datapaths on this host from network namespaces.\n\nPresets:\n" + PresetList() +
		"\nKnobs (--set key=value, or under knobs: in a YAML file): " + strings.Join(KnobNames(), ", ") + ".\nSee docs/lab.md."
}

// UpHelp is `cnibench lab up --help`'s description: the presets and every
// knob with the values it takes and where, from the registries.
func UpHelp() string {
	return "Build a topology from a preset or a topology file; what it creates is undone on failure or Ctrl-C.\n\nPresets:\n" +
		PresetList() + "\nKnobs (--set key=value, or under knobs: in a YAML file):\n" + KnobList() + "\nSee docs/lab.md."
}

// WriteEndpoints prints the lab's endpoints (at most six pods besides
// client and server: `lab show --json` lists all) and its service VIP.
func (l *Lab) WriteEndpoints(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tKIND\tIP\tNETNS")
	others, hidden := 0, 0
	for _, n := range l.EndpointNames() {
		e := l.Endpoints[n]
		if e.Kind == "pod" && n != "client" && n != "server" {
			if others++; others > 6 {
				hidden++
				continue
			}
		}
		ns := e.Netns
		if ns == "" {
			ns = "(host)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n, e.Kind, e.IP, ns)
	}
	tw.Flush()
	if hidden > 0 {
		fmt.Fprintf(w, "(%d more pods: cnibench lab show %s --json)\n", hidden, l.Name)
	}
	if l.ServiceIP != "" {
		fmt.Fprintf(w, "service VIP %s -> server\n", l.ServiceIP)
	}
}

// WriteSummary prints what `lab show` prints: name, state, build time,
// MTU, knobs, the host and namespace changes its journal holds, fast-path
// counters and the endpoints.
func (l *Lab) WriteSummary(w io.Writer) {
	state := l.State()
	if state == "incomplete" {
		state = "INCOMPLETE (its `lab up` died mid-way; run `cnibench lab down " + l.Name + "`)"
	}
	fmt.Fprintf(w, "lab %s  id %s  preset %s  %s\ncreated %s", l.Name, l.ID, l.Preset, state, l.Created.Format(time.RFC3339))
	if l.UpTime != "" {
		fmt.Fprintf(w, "  built in %s", l.UpTime)
	}
	fmt.Fprintln(w)
	if err := l.Health(); err != nil {
		fmt.Fprintf(w, "BROKEN: %v (take it down with `cnibench lab down %s`)\n", err, l.Name)
	}
	if l.PodMTU > 0 {
		fmt.Fprintf(w, "pod MTU %d\n", l.PodMTU)
	}
	if len(l.Knobs) > 0 {
		var ks []string
		for k, v := range l.Knobs {
			ks = append(ks, k+"="+v)
		}
		sort.Strings(ks)
		fmt.Fprintf(w, "knobs %s\n", strings.Join(ks, " "))
	}
	changes, err := l.Changes()
	if err != nil {
		fmt.Fprintf(w, "journal %s: %v\n", l.Journal, err)
	}
	if len(changes) > 0 {
		fmt.Fprintf(w, "changed (journal %s, restored on down):\n", l.Journal)
		tune.WriteChanges(w, changes, "  ")
	}
	if stats, ok, err := l.FastpathStats(); err != nil {
		fmt.Fprintf(w, "fastpath: %v\n", err)
	} else if ok {
		for i, st := range stats {
			fmt.Fprintf(w, "fastpath node%d: %d packets carried (into pods %d, routed out %d, next hop left to the kernel %d, tunnelled %d), %d left to the kernel\n",
				i+1, st.Forwarded(), st.Peer, st.FIB, st.Neigh, st.Tunnel, st.Pass)
		}
	}
	l.WriteEndpoints(w)
}

// WriteList prints labs a line each.
func WriteList(w io.Writer, labs []*Lab) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tPRESET\tPODS\tSTATE\tCREATED")
	for _, l := range labs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", l.Name, l.ID, l.Preset, l.Pods, l.State(), l.Created.Format(time.RFC3339))
	}
	return tw.Flush()
}

// StatusHelp is `cnibench tune status --help`'s description.
const StatusHelp = "status lists the journals of `tune apply` (in --journal-dir) that are not rolled back, then\n" +
	"every lab's journal (beside the labs' state files) with the changes it holds now: which lab\n" +
	"and run id, the setting, where (host or namespace), and its old and new values."

// Status prints `tune status`: the apply journals in dir that are not
// rolled back (all of them with all), then every lab's journal with the
// changes it holds now — as text, or as one JSON document.
func Status(w io.Writer, dir string, all, asJSON bool) error {
	js, err := tune.Journals(dir)
	if err != nil {
		return fmt.Errorf("read journals in %s: %w", dir, err)
	}
	labJs, lerr := Journals()
	if asJSON {
		shown := []tune.JournalInfo{}
		for _, j := range js {
			if all || !j.RolledBack {
				shown = append(shown, j)
			}
		}
		if labJs == nil {
			labJs = []JournalStatus{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Journals []tune.JournalInfo `json:"journals"`
			Labs     []JournalStatus    `json:"labs"`
		}{shown, labJs}); err != nil {
			return err
		}
		return lerr
	}
	if tune.WriteJournals(w, js, all) == 0 {
		fmt.Fprintf(w, "no applied journals in %s: nothing to roll back\n", dir)
	}
	for _, lj := range labJs {
		owner := fmt.Sprintf("lab %s (id %s, %s)", lj.Lab, lj.ID, lj.State)
		if lj.Lab == "" {
			owner = fmt.Sprintf("no lab (id %s; a killed `lab up`?): undo with `cnibench lab clean --id %s`", lj.ID, lj.ID)
		}
		fmt.Fprintf(w, "%s: journal %s, %d changes held\n", owner, lj.Path, len(lj.Held))
		if lj.Error != "" {
			fmt.Fprintf(w, "  unreadable: %s\n", lj.Error)
		}
		tune.WriteChanges(w, lj.Held, "  ")
	}
	return lerr
}
