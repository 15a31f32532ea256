package cli

import (
	"errors"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/lab"
)

func newLabCmd() *cobra.Command {
	return group("lab", "Build real container datapaths on this host (netns, veth, bridge, vxlan, OVS)", lab.Help(),
		labUpCmd(), labShowCmd(), labExecCmd(), labListCmd(), labDownCmd(), labCleanCmd())
}

func labUpCmd() *cobra.Command {
	var c lab.UpCommand
	cmd := command("up <preset|file.yaml>", "Build a topology (undone on failure or Ctrl-C)", cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string) error {
			c.Topology = args[0]
			return c.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
	cmd.Long = lab.UpHelp()
	cmd.Flags().StringVar(&c.Name, "name", "", "lab name (default <preset>-<id>)")
	cmd.Flags().StringArrayVar(&c.Sets, "set", nil, "knob key=value (repeatable): "+strings.Join(lab.KnobNames(), ", "))
	cmd.Flags().BoolVarP(&c.Quiet, "quiet", "q", false, "no progress lines")
	return cmd
}

func labShowCmd() *cobra.Command {
	return showCmd("show <name>", "Show a lab's pods, nodes, namespaces, addresses and knobs", "print the lab state as JSON", cobra.ExactArgs(1),
		func(_ *cobra.Command, args []string) (*lab.Lab, error) { return lab.Show(args[0]) },
		func(l *lab.Lab, w io.Writer) error { l.WriteSummary(w); return nil })
}

func labExecCmd() *cobra.Command {
	return command("exec <name> <endpoint> -- <argv...>", "Run a command inside an endpoint's namespace (stdio attached, exit code passed on)", cobra.MinimumNArgs(3),
		func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 2 {
				return UsageError{errors.New("lab exec: want <name> <endpoint> -- <argv...>")}
			}
			return lab.ExecIn(args[0], args[1], args[2:])
		})
}

func labListCmd() *cobra.Command {
	return command("list", "List labs", cobra.NoArgs, func(cmd *cobra.Command, _ []string) error { return lab.ListPrint(cmd.OutOrStdout()) })
}

func labDownCmd() *cobra.Command {
	return command("down <name>", "Remove a lab and everything it created", cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string) error {
			return lab.DownNamed(cmd.Context(), args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		})
}

func labCleanCmd() *cobra.Command {
	var id string
	cmd := command("clean", "Remove every lab and every cnb-* object a killed run left behind", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return lab.CleanPrint(cmd.Context(), id, cmd.OutOrStdout())
		})
	cmd.Flags().StringVar(&id, "id", "", "only the objects of this run id (cnb-<id>-…)")
	return cmd
}
