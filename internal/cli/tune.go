package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/tune"
	"github.com/cnibench/cnibench/pkg/units"
	"github.com/spf13/cobra"
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
			ks, err := tune.Select(units.SplitList(only))
			if err != nil {
				return UsageError{err}
			}
			nss, err := lab.ScopeNamespaces(scope)
			if err != nil {
				return UsageError{err}
			}
			fs := tune.AuditNetns(tune.EnvAt(root), ks, profiles, nss)
			if asJSON {
				return report.WriteJSON(cmd.OutOrStdout(), fs)
			}
			return tune.WriteFindings(cmd.OutOrStdout(), fs, len(profiles) > 1)
		},
	}
	c.Flags().StringVar(&profile, "profile", "", "latency or throughput (default: both)")
	c.Flags().StringVar(&root, "root", "/", "read /proc, /sys and /dev under this directory (fixture trees)")
	c.Flags().StringVar(&only, "only", "", "comma-separated knob ids")
	c.Flags().StringVar(&scope, "scope", "host", "host, lab:<name> or netns:<name> (per-namespace knobs only)")
	c.Flags().BoolVar(&asJSON, "json", false, "print findings as JSON")
	return c
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
			ks, err := tune.Select(units.SplitList(only))
			if err != nil {
				return UsageError{err}
			}
			nss, err := lab.ScopeNamespaces(scope)
			if err != nil {
				return UsageError{err}
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
					if jerr := report.WriteJSON(cmd.OutOrStdout(), rep); jerr != nil {
						return jerr
					}
				} else {
					tune.WriteApply(cmd.OutOrStdout(), rep, dry)
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
			return lab.Status(cmd.OutOrStdout(), dir, all, asJSON)
		},
	}
	c.Flags().StringVar(&dir, "journal-dir", tune.DefaultJournalDir, "where journals are kept")
	c.Flags().BoolVar(&all, "all", false, "also list journals already rolled back")
	c.Flags().BoolVar(&asJSON, "json", false, "print the journals and the labs' held changes as JSON")
	return c
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
			// main cancels the context on Ctrl-C, SIGTERM and SIGHUP.
			return tune.HoldUntil(cmd.Context(), tune.DefaultEnv(), us, cmd.OutOrStdout())
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
			rows := tune.KnobRows()
			if asJSON {
				return report.WriteJSON(cmd.OutOrStdout(), rows)
			}
			return tune.WriteKnobs(cmd.OutOrStdout(), rows, markdown)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	c.Flags().BoolVar(&markdown, "markdown", false, "print as a Markdown table (docs/tuning.md)")
	return c
}
