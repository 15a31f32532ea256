package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/client"
	"github.com/cnibench/cnibench/pkg/datapath"
	"github.com/cnibench/cnibench/pkg/disrupt"
	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/engine"
	"github.com/cnibench/cnibench/pkg/experiment"
	"github.com/cnibench/cnibench/pkg/image"
	"github.com/cnibench/cnibench/pkg/k8s"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/pathmtu"
	"github.com/cnibench/cnibench/pkg/pressure"
	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/cnibench/cnibench/pkg/stages"
	"github.com/cnibench/cnibench/pkg/store"
	"github.com/cnibench/cnibench/pkg/tune"
	"github.com/cnibench/cnibench/pkg/verify"
)

// command is a leaf command: its positional arguments are checked by args,
// and run does its work. Long help, examples and flags are added by the caller.
// A refusal by args is a usage error (exit 2) whoever wrote it: cobra's own
// validators (NoArgs: "unknown command") return plain errors.
func command(use, short string, args cobra.PositionalArgs, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	check := args
	if args != nil {
		check = func(cmd *cobra.Command, a []string) error {
			err := args(cmd, a)
			var u UsageError
			if err != nil && !errors.As(err, &u) {
				err = UsageError{err}
			}
			return err
		}
	}
	return &cobra.Command{Use: use, Short: short, Args: check, RunE: run}
}

// hidden is a command only cnibench's own pods run.
func hidden(c *cobra.Command) *cobra.Command {
	c.Hidden = true
	return c
}

// group is a command that only holds subcommands.
func group(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Long: long}
	c.AddCommand(subs...)
	return c
}

// showCmd is a command that gets one value and prints it as text, or as
// JSON with --json (described by jsonHelp).
func showCmd[T any](use, short, jsonHelp string, args cobra.PositionalArgs,
	get func(cmd *cobra.Command, args []string) (T, error), text func(v T, w io.Writer) error) *cobra.Command {
	var asJSON bool
	cmd := command(use, short, args, func(cmd *cobra.Command, args []string) error {
		v, err := get(cmd, args)
		if err != nil {
			return err
		}
		if asJSON {
			return report.WriteJSON(cmd.OutOrStdout(), v)
		}
		return text(v, cmd.OutOrStdout())
	})
	cmd.Flags().BoolVar(&asJSON, "json", false, jsonHelp)
	return cmd
}

// argsUsage accepts min to max positional arguments (max < 0: no limit);
// other counts are a usage error, which bad words.
func argsUsage(min, max int, bad func(args []string) error) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return UsageError{bad(args)}
		}
		return nil
	}
}

// exactArgs wants n positional arguments; other counts are a usage error
// worded by format, which gets the count.
func exactArgs(n int, format string) cobra.PositionalArgs {
	return argsUsage(n, n, func(args []string) error { return fmt.Errorf(format, len(args)) })
}

// addDBFlag adds --db to a command that reads or writes the results
// database. Its default honours $CNIBENCH_DB and $XDG_DATA_HOME.
func addDBFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "db", store.DefaultPath(), "results database: a SQLite file, or a postgres:// URL (env CNIBENCH_DB)")
}

// usageErrors are the packages' sentinels for input the user fixes by
// changing the command line (a bad flag value, an unknown run, a missing
// database).
var usageErrors = []error{
	store.ErrNotFound, store.ErrNoDatabase, store.ErrNoSuchArm, store.ErrInvalid, stages.ErrNotProfiled, driver.ErrInvalid,
	experiment.ErrInvalid, lab.ErrInvalid, client.ErrInvalid, image.ErrInvalid, report.ErrInvalid,
	tune.ErrInvalid, verify.ErrInvalid, profile.ErrInvalid, engine.ErrInvalid, k8s.ErrInvalid, datapath.ErrInvalid, disrupt.ErrInvalid,
	pathmtu.ErrInvalid, pressure.ErrInvalid,
}

// usage marks the errors in usageErrors as usage errors, which exit 2;
// others pass unchanged. Run applies it to every command's error: the one
// place bad input becomes exit 2, whichever package refused it.
func usage(err error) error {
	for _, u := range usageErrors {
		if errors.Is(err, u) {
			return UsageError{err}
		}
	}
	return err
}
