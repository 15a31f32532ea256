package cli

import (
	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/tune"
	"github.com/cnibench/cnibench/pkg/verify"
)

func newTuneVerifyCmd() *cobra.Command {
	v := verify.Command{Version: Version}
	c := command("verify --profile P --experiment FILE|NAME", "Measure an experiment, apply a profile, measure again, roll back, and compare", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return v.Verify(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	c.Long = verify.Help
	f := c.Flags()
	f.StringVar(&v.Profile, "profile", "", "latency or throughput")
	f.StringVar(&v.Experiment, "experiment", "", "experiment file, or the name of a ready experiment")
	f.StringVar(&v.Scope, "scope", "lab", "lab (the experiment's lab namespaces only) or host (also this host; needs --yes)")
	f.StringVar(&v.Only, "only", "", "comma-separated knob ids (default: all)")
	f.BoolVar(&v.Keep, "keep", false, "keep the profile applied afterwards (host changes stay; lab namespaces go with their labs)")
	f.BoolVar(&v.Yes, "yes", false, "confirm changing this host (needed for --scope host)")
	f.StringVar(&v.JournalDir, "journal-dir", tune.DefaultJournalDir, "where journals are written")
	addDBFlag(c, &v.DB)
	addOverrideFlags(f, &v.Run)
	return c
}
