package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/tune"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func newTuneCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "tune",
		Short: "Audit, apply and roll back host and datapath tuning knobs",
		Long: "tune reads the knobs the Kube-OVN, OVS and Cilium documents and the tuned profiles name,\n" +
			"compares them with a latency or throughput profile, applies a profile with a journal\n" +
			"written before any change, and rolls back exactly. See docs/tuning.md.",
	}
	c.AddCommand(tuneAuditCmd(), tuneApplyCmd(), tuneStatusCmd(), tuneRollbackCmd(), tuneHoldCmd(), tuneKnobsCmd(), newTuneVerifyCmd())
	return c
}

func parseProfiles(s string) ([]tune.Profile, error) {
	if s == "" {
		return tune.Profiles(), nil
	}
	p, err := tune.ParseProfile(s)
	if err != nil {
		return nil, UsageError{err}
	}
	return []tune.Profile{p}, nil
}

func splitIDs(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// envForRoot builds the knob environment. With a root other than "/", knobs
// that can only ask the live kernel (ethtool, netlink, nftables) report that
// instead of mixing live values into a fixture audit.
func envForRoot(root string) *tune.Env {
	e := tune.DefaultEnv()
	if root == "" || root == "/" {
		return e
	}
	e.ProcRoot = filepath.Join(root, "proc")
	e.SysRoot = filepath.Join(root, "sys")
	e.DevRoot = filepath.Join(root, "dev")
	e.OVSDB = filepath.Join(root, "var/run/openvswitch/db.sock")
	e.NIC, e.Links, e.Rules = liveOnly{}, liveOnly{}, liveOnly{}
	return e
}

type liveOnly struct{}

var errLiveOnly = errors.New("not available with --root: this knob asks the live kernel (ethtool/netlink/nftables)")

func (liveOnly) Driver(string) (string, error)                    { return "", errLiveOnly }
func (liveOnly) Ring(string) (tune.Ring, error)                   { return tune.Ring{}, errLiveOnly }
func (liveOnly) SetRing(string, uint32, uint32) error             { return errLiveOnly }
func (liveOnly) Features(string) (map[string]tune.Feature, error) { return nil, errLiveOnly }
func (liveOnly) SetFeature(string, string, bool) error            { return errLiveOnly }
func (liveOnly) Links(string) ([]tune.LinkInfo, error)            { return nil, errLiveOnly }
func (liveOnly) KubeProxyRules() (int, int, error)                { return 0, 0, errLiveOnly }

// scopeNamespaces resolves --scope: host → nil; netns:<name> → that
// namespace; lab:<name> → the lab's endpoint namespaces.
func scopeNamespaces(scope string) ([]string, error) {
	switch {
	case scope == "" || scope == "host":
		return nil, nil
	case strings.HasPrefix(scope, "netns:"):
		name := strings.TrimPrefix(scope, "netns:")
		if name == "" || !netns.Exists(name) {
			return nil, UsageError{fmt.Errorf("--scope %s: no network namespace %q in %s (see `ip netns list`)", scope, name, netns.Dir)}
		}
		return []string{name}, nil
	case strings.HasPrefix(scope, "lab:"):
		return labNamespaces(strings.TrimPrefix(scope, "lab:"))
	}
	return nil, UsageError{fmt.Errorf("bad --scope %q: use host, lab:<name> or netns:<name>", scope)}
}

func tuneAuditCmd() *cobra.Command {
	var profile, root, only, scope string
	var asJSON bool
	c := &cobra.Command{
		Use:   "audit",
		Short: "Show every knob: current value, recommendation, status and source",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			profiles, err := parseProfiles(profile)
			if err != nil {
				return err
			}
			ks, err := tune.Select(splitIDs(only))
			if err != nil {
				return UsageError{err}
			}
			e := envForRoot(root)
			nss, err := scopeNamespaces(scope)
			if err != nil {
				return err
			}
			var fs []tune.Finding
			if len(nss) == 0 {
				fs = tune.Audit(e, ks, profiles)
			} else {
				var netKs, once []*tune.Knob
				for _, k := range ks {
					switch {
					case k.ID == "mtu.consistency":
						once = append(once, k) // compares pods with tunnels across all the namespaces
					case k.Scope == tune.ScopeNetns:
						netKs = append(netKs, k)
					}
				}
				for _, n := range nss {
					fs = append(fs, tune.Audit(e.WithNetns(n), netKs, profiles)...)
				}
				e.LabNetns = nss
				fs = append(fs, tune.Audit(e, once, profiles)...)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(fs)
			}
			return printFindings(cmd.OutOrStdout(), fs, len(profiles) > 1)
		},
	}
	c.Flags().StringVar(&profile, "profile", "", "latency or throughput (default: both)")
	c.Flags().StringVar(&root, "root", "/", "read /proc, /sys and /dev under this directory (fixture trees)")
	c.Flags().StringVar(&only, "only", "", "comma-separated knob ids")
	c.Flags().StringVar(&scope, "scope", "host", "host, lab:<name> or netns:<name> (per-namespace knobs only)")
	c.Flags().BoolVar(&asJSON, "json", false, "print findings as JSON")
	return c
}

func printFindings(w io.Writer, fs []tune.Finding, withProfile bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	hdr := "KNOB\tTARGET\tCURRENT\tRECOMMENDED\tSTATUS\tSOURCE\tNOTE"
	if withProfile {
		hdr = "PROFILE\t" + hdr
	}
	fmt.Fprintln(tw, hdr)
	for _, f := range fs {
		note := ""
		if f.Status != tune.StatusOK {
			note = f.Why
		}
		tgt := nsTarget(f.Netns, f.Target)
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", f.Knob, tuneDash(tgt), tuneDash(f.Current), tuneDash(f.Recommended), f.Status, tuneDash(f.Source), note)
		if withProfile {
			row = string(f.Profile) + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
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

func tuneDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func tuneApplyCmd() *cobra.Command {
	var profile, only, scope, dir string
	var dry, yes, asJSON bool
	c := &cobra.Command{
		Use:   "apply",
		Short: "Apply a profile: journal first (fsynced), then change the host; one failure does not stop the rest",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if profile == "" {
				return UsageError{errors.New("apply needs --profile latency or --profile throughput")}
			}
			p, err := tune.ParseProfile(profile)
			if err != nil {
				return UsageError{err}
			}
			ks, err := tune.Select(splitIDs(only))
			if err != nil {
				return UsageError{err}
			}
			nss, err := scopeNamespaces(scope)
			if err != nil {
				return err
			}
			if len(nss) == 0 && !yes && !dry {
				return UsageError{errors.New("apply --scope host changes this machine's settings: add --yes, or --dry-run to see the plan")}
			}
			if !dry && os.Geteuid() != 0 {
				return UsageError{errors.New("apply writes kernel settings and needs root: run it with sudo, or use --dry-run")}
			}
			rep, err := tune.Apply(tune.ApplyOptions{Env: tune.DefaultEnv(), Profile: p, Knobs: ks, Netns: nss,
				ScopeLabel: scopeLabel(scope), DryRun: dry, JournalDir: dir})
			if rep != nil {
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					if jerr := enc.Encode(rep); jerr != nil {
						return jerr
					}
				} else {
					printApply(cmd.OutOrStdout(), rep, dry)
				}
			}
			if err != nil {
				return err
			}
			if n := rep.Failed(); n > 0 {
				return fmt.Errorf("%d of %d changes failed (see above); the journal %s records the rest: `cnibench tune rollback` undoes them",
					n, len(rep.Changes), rep.Journal)
			}
			return nil
		},
	}
	c.Flags().StringVar(&profile, "profile", "", "latency or throughput")
	c.Flags().StringVar(&only, "only", "", "comma-separated knob ids (default: all)")
	c.Flags().StringVar(&scope, "scope", "host", "host, lab:<name> or netns:<name>")
	c.Flags().BoolVar(&yes, "yes", false, "confirm changing this host (needed for --scope host)")
	c.Flags().BoolVar(&dry, "dry-run", false, "print what would change, change nothing")
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	c.Flags().StringVar(&dir, "journal-dir", tune.DefaultJournalDir, "where journals are written")
	return c
}

func scopeLabel(s string) string {
	if s == "" {
		return "host"
	}
	return s
}

func printApply(w io.Writer, rep *tune.ApplyReport, dry bool) {
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
		tgt := nsTarget(c.Netns, c.Target)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Knob, tuneDash(tgt), c.Old, c.New, res)
	}
	for _, s := range rep.Skipped {
		tgt := nsTarget(s.Netns, s.Target)
		fmt.Fprintf(tw, "%s\t%s\t\t\tskipped: %s\n", s.Knob, tuneDash(tgt), s.Reason)
	}
	tw.Flush()
	switch {
	case rep.Journal != "":
		fmt.Fprintf(w, "journal: %s (undo with `cnibench tune rollback`)\n", rep.Journal)
	case len(rep.Changes) == 0:
		fmt.Fprintln(w, "nothing to change")
	}
}

func tuneStatusCmd() *cobra.Command {
	var dir string
	var all, asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "List applied journals that are not rolled back, and what each lab holds changed",
		Long: "status lists the journals of `tune apply` (in --journal-dir) that are not rolled back, then\n" +
			"every lab's journal (beside the labs' state files) with the changes it holds now: which lab\n" +
			"and run id, the setting, where (host or namespace), and its old and new values.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			js, err := tune.Journals(dir)
			if err != nil {
				return fmt.Errorf("read journals in %s: %w", dir, err)
			}
			labJs, lerr := lab.Journals()
			w := cmd.OutOrStdout()
			if asJSON {
				var shown []tune.JournalInfo
				for _, j := range js {
					if all || !j.RolledBack {
						shown = append(shown, j)
					}
				}
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(struct {
					Journals []tune.JournalInfo  `json:"journals"`
					Labs     []lab.JournalStatus `json:"labs"`
				}{orEmpty(shown), orEmpty(labJs)}); err != nil {
					return err
				}
				return lerr
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "JOURNAL\tSTARTED\tPROFILE\tSCOPE\tCHANGES\tFAILED\tUNFINISHED\tSTATE")
			n := 0
			for _, j := range js {
				if j.RolledBack && !all {
					continue
				}
				n++
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", j.Path, j.Started.Format("2006-01-02 15:04:05Z"),
					j.Profile, j.Scope, j.Changes, j.Failed, j.Unfinished, journalState(j))
			}
			tw.Flush()
			if n == 0 {
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
				printChanges(w, lj.Held, "  ")
			}
			return lerr
		},
	}
	c.Flags().StringVar(&dir, "journal-dir", tune.DefaultJournalDir, "where journals are kept")
	c.Flags().BoolVar(&all, "all", false, "also list journals already rolled back")
	c.Flags().BoolVar(&asJSON, "json", false, "print the journals and the labs' held changes as JSON")
	return c
}

func journalState(j tune.JournalInfo) string {
	switch {
	case j.Error != "":
		return "unreadable: " + j.Error
	case j.RolledBack:
		return "rolled back"
	case j.Unfinished > 0:
		return "interrupted (crash during apply)"
	}
	return "applied"
}

// printChanges lists journal change entries: setting, where, old -> new.
func printChanges(w io.Writer, cs []tune.Entry, indent string) {
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

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func tuneRollbackCmd() *cobra.Command {
	var dir, file string
	c := &cobra.Command{
		Use:   "rollback",
		Short: "Restore every journaled value exactly (all journals not rolled back, newest first, or one --journal)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := tune.DefaultEnv()
			w := cmd.OutOrStdout()
			if file != "" {
				if _, err := os.Stat(file); err != nil {
					return UsageError{fmt.Errorf("--journal %s: %w", file, err)}
				}
				n, err := tune.Rollback(e, file)
				if errors.Is(err, tune.ErrRolledBack) {
					fmt.Fprintf(w, "%s was already rolled back: nothing to do\n", file)
					return nil
				}
				fmt.Fprintf(w, "restored %d values from %s\n", n, file)
				return err
			}
			js, n, err := tune.RollbackAll(e, dir)
			if js == 0 && err == nil {
				fmt.Fprintf(w, "no applied journals in %s: nothing to roll back\n", dir)
				return nil
			}
			fmt.Fprintf(w, "restored %d values from %d journals\n", n, js)
			return err
		},
	}
	c.Flags().StringVar(&dir, "journal-dir", tune.DefaultJournalDir, "where journals are kept")
	c.Flags().StringVar(&file, "journal", "", "roll back this journal file only")
	return c
}

func tuneHoldCmd() *cobra.Command {
	var us int32
	c := &cobra.Command{
		Use:   "hold-latency",
		Short: "Hold the CPU C-state exit latency limit (/dev/cpu_dma_latency) until Ctrl-C",
		Long: "The kernel honours a /dev/cpu_dma_latency request only while the requesting process keeps\n" +
			"the file open, so this command stays in the foreground; the limit ends when it exits.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if us < 0 {
				return UsageError{fmt.Errorf("--us %d: must be 0 or more microseconds", us)}
			}
			e := tune.DefaultEnv()
			release, err := tune.HoldDMALatency(e, us)
			if err != nil {
				return fmt.Errorf("hold cpu_dma_latency: %w (needs root)", err)
			}
			defer release()
			cur, _ := tune.ReadDMALatency(e)
			fmt.Fprintf(cmd.OutOrStdout(), "holding cpu_dma_latency at %d µs (kernel now reports %d); Ctrl-C to release\n", us, cur)
			ctx := cmd.Context()
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, unix.SIGINT, unix.SIGTERM)
			defer signal.Stop(sig)
			select {
			case <-ctx.Done():
			case <-sig:
			}
			fmt.Fprintln(cmd.OutOrStdout(), "released")
			return nil
		},
	}
	c.Flags().Int32Var(&us, "us", 1, "maximum C-state exit latency in microseconds")
	return c
}

func tuneKnobsCmd() *cobra.Command {
	var asJSON, markdown bool
	c := &cobra.Command{
		Use:   "knobs",
		Short: "List the knob registry: what each reads/writes, scope, profiles, source, risk",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			type row struct {
				ID, Title, Scope, Access, Latency, Throughput, Source, Risk string
				AuditOnly                                                   bool
			}
			var rows []row
			for _, k := range tune.Knobs() {
				r := row{ID: k.ID, Title: k.Title, Scope: string(k.Scope), Access: k.Access, Risk: k.Risk, AuditOnly: k.AuditOnly}
				var srcs []string
				if rec, ok := k.Recs[tune.Latency]; ok {
					r.Latency, srcs = rec.Value, append(srcs, rec.Source)
				}
				if rec, ok := k.Recs[tune.Throughput]; ok {
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
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			if markdown {
				fmt.Fprintln(w, "| id | what | reads/writes | scope | latency | throughput | source | risk |")
				fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
				for _, r := range rows {
					ao := ""
					if r.AuditOnly {
						ao = " (audit only)"
					}
					fmt.Fprintf(w, "| `%s` | %s%s | %s | %s | %s | %s | %s | %s |\n", r.ID, r.Title, ao,
						strings.ReplaceAll(r.Access, "|", "\\|"), r.Scope, tuneDash(r.Latency), tuneDash(r.Throughput), r.Source, r.Risk)
				}
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSCOPE\tLATENCY\tTHROUGHPUT\tREADS/WRITES")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Scope, tuneDash(r.Latency), tuneDash(r.Throughput), r.Access)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	c.Flags().BoolVar(&markdown, "markdown", false, "print as a Markdown table (docs/tuning.md)")
	return c
}
