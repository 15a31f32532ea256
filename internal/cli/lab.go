package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/report"
	"github.com/spf13/cobra"
)

func newLabCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Build real container datapaths on this host (netns, veth, bridge, vxlan, OVS)",
		Long: "Build real container datapaths on this host from network namespaces.\n\nPresets:\n" + lab.PresetList() +
			"\nKnobs (--set key=value, or under knobs: in a YAML file): " + strings.Join(lab.KnobNames(), ", ") + ".\nSee docs/lab.md.",
	}
	cmd.AddCommand(labUpCmd(), labShowCmd(), labExecCmd(), labListCmd(), labDownCmd(), labCleanCmd())
	return cmd
}

func labUpCmd() *cobra.Command {
	var name string
	var sets []string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "up <preset|file.yaml>",
		Short: "Build a topology (undone on failure or Ctrl-C)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			knobs, err := lab.ParseSets(sets)
			if err != nil {
				return UsageError{err}
			}
			spec, err := lab.Resolve(args[0], "", knobs)
			if err != nil {
				return UsageError{err}
			}
			var log io.Writer
			if !quiet {
				log = cmd.ErrOrStderr()
			}
			start := time.Now()
			l, err := lab.Up(cmd.Context(), spec, lab.UpOptions{Name: name, Log: log})
			if err != nil {
				if errors.Is(err, lab.ErrInvalid) {
					return UsageError{err}
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lab %s up (%s, %d pods) in %v\n", l.Name, l.Preset, l.Pods, time.Since(start).Round(time.Microsecond))
			l.WriteEndpoints(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "lab name (default <preset>-<id>)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "knob key=value (repeatable): "+strings.Join(lab.KnobNames(), ", "))
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines")
	return cmd
}

func labShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show <name>",
		Short: "Show a lab's pods, nodes, namespaces, addresses and knobs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.Get(args[0])
			if err != nil {
				return UsageError{err}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return report.WriteJSON(w, l)
			}
			l.WriteSummary(w)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the lab state as JSON")
	return cmd
}

func labExecCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "exec <name> <endpoint> -- <argv...>",
		Short: "Run a command inside an endpoint's namespace (stdio attached, exit code passed on)",
		Args:  cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 2 {
				return UsageError{errors.New("lab exec: want <name> <endpoint> -- <argv...>")}
			}
			l, err := lab.Get(args[0])
			if err != nil {
				return UsageError{err}
			}
			ep, err := l.Endpoint(args[1])
			if err != nil {
				return UsageError{err}
			}
			argv := args[2:]
			path, err := exec.LookPath(argv[0])
			if err != nil {
				return UsageError{fmt.Errorf("lab exec: %w", err)}
			}
			// Exec, not fork+wait: signals sent to this process reach the
			// command, and its exit status is ours (as `ip netns exec`).
			argv[0] = path
			return fmt.Errorf("lab exec: %w", netns.Exec(ep.Netns, argv, os.Environ()))
		},
	}
}

func labListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List labs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			labs, err := lab.List()
			if werr := lab.WriteList(cmd.OutOrStdout(), labs); err == nil {
				err = werr
			}
			return err
		},
	}
}

func labDownCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "down <name>",
		Short: "Remove a lab and everything it created",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			l, err := lab.Get(args[0])
			if errors.Is(err, lab.ErrNoLab) {
				// Like CNI DEL: removing what is not there succeeds.
				fmt.Fprintf(cmd.ErrOrStderr(), "lab %s: not found, nothing to remove (see `cnibench lab list`)\n", args[0])
				return nil
			}
			if err != nil {
				return err
			}
			if err := l.Down(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lab %s down in %v\n", l.Name, time.Since(start).Round(time.Microsecond))
			return nil
		},
	}
}

func labCleanCmd() *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove every lab and every cnb-* object a killed run left behind",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			var removed []string
			var err error
			if id != "" {
				removed, err = lab.CleanID(cmd.Context(), id)
			} else {
				removed, err = lab.Clean(cmd.Context())
			}
			for _, r := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), "removed", r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "clean: %d objects removed in %v\n", len(removed), time.Since(start).Round(time.Microsecond))
			return err
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "only the objects of this run id (cnb-<id>-…)")
	return cmd
}
