package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/tune"
)

func newTuneCmd() *cobra.Command {
	return group("tune", "Audit, apply and roll back host and datapath tuning knobs", tune.Help,
		tuneAuditCmd(), tuneApplyCmd(), tuneStatusCmd(), tuneRollbackCmd(), tuneHoldCmd(), tuneKnobsCmd(), newTuneVerifyCmd())
}

func tuneAuditCmd() *cobra.Command {
	a := tune.AuditCommand{Selection: tune.Selection{Namespaces: lab.ScopeNamespaces}}
	c := command("audit", "Show every knob: current value, recommendation, status and source", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error { return a.Run(cmd.OutOrStdout()) })
	c.Flags().StringVar(&a.Profile, "profile", "", "latency or throughput (default: both)")
	c.Flags().StringVar(&a.Root, "root", "/", "read /proc, /sys and /dev under this directory (fixture trees)")
	c.Flags().StringVar(&a.Only, "only", "", "comma-separated knob ids")
	c.Flags().StringVar(&a.Scope, "scope", "host", "host, lab:<name> or netns:<name> (per-namespace knobs only)")
	c.Flags().BoolVar(&a.JSON, "json", false, "print findings as JSON")
	return c
}

func tuneApplyCmd() *cobra.Command {
	a := tune.ApplyCommand{Selection: tune.Selection{Namespaces: lab.ScopeNamespaces}}
	c := command("apply", "Apply a profile: journal first (fsynced), then change the host; one failure does not stop the rest", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error { return a.Run(cmd.OutOrStdout()) })
	c.Flags().StringVar(&a.Profile, "profile", "", "latency or throughput")
	c.Flags().StringVar(&a.Only, "only", "", "comma-separated knob ids (default: all)")
	c.Flags().StringVar(&a.Scope, "scope", "host", "host, lab:<name> or netns:<name>")
	c.Flags().BoolVar(&a.Yes, "yes", false, "confirm changing this host (needed for --scope host)")
	c.Flags().BoolVar(&a.DryRun, "dry-run", false, "print what would change, change nothing")
	c.Flags().BoolVar(&a.JSON, "json", false, "print the report as JSON")
	c.Flags().StringVar(&a.JournalDir, "journal-dir", tune.DefaultJournalDir, "where journals are written")
	return c
}

func tuneStatusCmd() *cobra.Command {
	var dir string
	var all, asJSON bool
	c := command("status", "List applied journals that are not rolled back, and what each lab holds changed", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error { return lab.Status(cmd.OutOrStdout(), dir, all, asJSON) })
	c.Long = lab.StatusHelp
	c.Flags().StringVar(&dir, "journal-dir", tune.DefaultJournalDir, "where journals are kept")
	c.Flags().BoolVar(&all, "all", false, "also list journals already rolled back")
	c.Flags().BoolVar(&asJSON, "json", false, "print the journals and the labs' held changes as JSON")
	return c
}

func tuneRollbackCmd() *cobra.Command {
	var dir, file string
	c := command("rollback", "Restore every journaled value exactly (all journals not rolled back, newest first, or one --journal)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return tune.RollbackPrint(tune.DefaultEnv(), dir, file, cmd.OutOrStdout())
		})
	c.Flags().StringVar(&dir, "journal-dir", tune.DefaultJournalDir, "where journals are kept")
	c.Flags().StringVar(&file, "journal", "", "roll back this journal file only")
	return c
}

func tuneHoldCmd() *cobra.Command {
	var us int32
	c := command("hold-latency", "Hold the CPU C-state exit latency limit (/dev/cpu_dma_latency) until Ctrl-C", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			// main cancels the context on Ctrl-C, SIGTERM and SIGHUP.
			return tune.HoldUntil(cmd.Context(), tune.DefaultEnv(), us, cmd.OutOrStdout())
		})
	c.Long = tune.HoldHelp
	c.Flags().Int32Var(&us, "us", 1, "maximum C-state exit latency in microseconds")
	return c
}

func tuneKnobsCmd() *cobra.Command {
	var markdown bool
	c := showCmd("knobs", "List the knob registry: what each reads/writes, scope, profiles, source, risk", "print as JSON", cobra.NoArgs,
		func(*cobra.Command, []string) ([]tune.KnobRow, error) { return tune.KnobRows(), nil },
		func(rows []tune.KnobRow, w io.Writer) error { return tune.WriteKnobs(w, rows, markdown) })
	c.Flags().BoolVar(&markdown, "markdown", false, "print as a Markdown table (docs/tuning.md)")
	return c
}
