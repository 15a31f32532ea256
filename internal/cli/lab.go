package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/spf13/cobra"
)

func newLabCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Build real container datapaths on this host (netns, veth, bridge, vxlan, OVS)",
		Long: "Build real container datapaths on this host from network namespaces.\n\nPresets:\n" + presetList() +
			"\nKnobs (--set key=value, or under knobs: in a YAML file): " + strings.Join(lab.KnobNames(), ", ") + ".\nSee docs/lab.md.",
	}
	cmd.AddCommand(labUpCmd(), labShowCmd(), labExecCmd(), labListCmd(), labDownCmd(), labCleanCmd())
	return cmd
}

func presetList() string {
	var b strings.Builder
	for _, p := range lab.Presets() {
		fmt.Fprintf(&b, "  %-18s %s\n", p, lab.PresetHelp(p))
	}
	return b.String()
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
			var spec *lab.Spec
			var err error
			if strings.HasSuffix(args[0], ".yaml") || strings.HasSuffix(args[0], ".yml") || strings.Contains(args[0], "/") {
				spec, err = lab.LoadSpecFile(args[0])
			} else {
				spec, err = lab.Preset(args[0])
			}
			if err != nil {
				return UsageError{err}
			}
			for _, kv := range sets {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return UsageError{fmt.Errorf("--set %q: want key=value (knobs: %s)", kv, strings.Join(lab.KnobNames(), ", "))}
				}
				if err := spec.Set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
					return UsageError{err}
				}
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
			printEndpoints(cmd.OutOrStdout(), l)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "lab name (default <preset>-<id>)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "knob key=value (repeatable): "+strings.Join(lab.KnobNames(), ", "))
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines")
	return cmd
}

func printEndpoints(w io.Writer, l *lab.Lab) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tKIND\tIP\tNETNS")
	others, hidden := 0, 0
	for _, n := range l.EndpointNames() {
		e := l.Endpoints[n]
		if e.Kind == "pod" && n != "client" && n != "server" {
			if others++; others > 6 {
				hidden++ // big topologies: `lab show --json` lists all
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
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(l)
			}
			state := l.State()
			if state == "incomplete" {
				state = "INCOMPLETE (its `lab up` died mid-way; run `cnibench lab down " + l.Name + "`)"
			}
			fmt.Fprintf(w, "lab %s  id %s  preset %s  %s\ncreated %s", l.Name, l.ID, l.Preset, state, l.Created.Format(time.RFC3339))
			if l.UpTime != "" {
				fmt.Fprintf(w, "  built in %s", l.UpTime)
			}
			fmt.Fprintln(w)
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
				printChanges(w, changes, "  ")
			}
			if stats, ok, err := l.FastpathStats(); err != nil {
				fmt.Fprintf(w, "fastpath: %v\n", err)
			} else if ok {
				for i, st := range stats {
					fmt.Fprintf(w, "fastpath node%d: %d packets carried (into pods %d, routed out %d, next hop left to the kernel %d, tunnelled %d), %d left to the kernel\n",
						i+1, st.Forwarded(), st.Peer, st.FIB, st.Neigh, st.Tunnel, st.Pass)
				}
			}
			printEndpoints(w, l)
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
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tID\tPRESET\tPODS\tSTATE\tCREATED")
			for _, l := range labs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", l.Name, l.ID, l.Preset, l.Pods, l.State(), l.Created.Format(time.RFC3339))
			}
			tw.Flush()
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
