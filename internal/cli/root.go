// Package cli holds cnibench's cobra commands. Commands turn flags into option
// structs and call into pkg/...; they hold no measurement or lab logic.
//
// Each command group lives in its own file as a newXCmd constructor; NewRoot
// lists them all, so the whole tree is readable in one place and nothing
// depends on the order files are initialised in.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X github.com/cnibench/cnibench/internal/cli.Version=...".
var Version = "dev"

// UsageError marks an error caused by the user's input; it exits with code 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ExitCode maps an error returned by Run to a process exit code.
func ExitCode(err error) int {
	var u UsageError
	if errors.As(err, &u) {
		return 2
	}
	// An error that carries a process's exit status (lab exec) passes it on.
	var c interface{ ExitCode() int }
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return 1
}

// NewRoot builds the command tree. Exposed for tests of the CLI.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "cnibench",
		Short:         "Measure, compare and tune container network datapaths",
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageError{err} })
	root.AddCommand(
		newServerCmd(), newClientCmd(), // the engine
		newLabCmd(), newProbeCmd(), // the lab and what this host can build
		newRunCmd(), newPressureCmd(), newPressureServerCmd(), newCrosscheckCmd(), newRunsCmd(), newReportCmd(), newCompareCmd(), newHistoryCmd(), newExplainCmd(), // experiments and history
		newTuneCmd(),               // tuning
		newDisruptCmd(),            // disruption timelines
		newImageCmd(), newK8sCmd(), // Kubernetes
		newVersionCmd(),
	)
	return root
}

// Run executes cnibench with args (without the program name).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	return usage(root.ExecuteContext(ctx))
}

func newVersionCmd() *cobra.Command {
	return command("version", "Print cnibench's version", cobra.NoArgs, func(cmd *cobra.Command, _ []string) error {
		_, err := fmt.Fprintln(cmd.OutOrStdout(), "cnibench", Version)
		return err
	})
}
