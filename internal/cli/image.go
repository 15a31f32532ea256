package cli

import (
	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/image"
)

func newImageCmd() *cobra.Command {
	return group("image", "Build the cnibench container image (for Kubernetes runs) and push it to a registry", "", newImageBuildCmd(), newImagePushCmd())
}

func newImagePushCmd() *cobra.Command {
	c := image.PushCommand{Build: image.BuildOptions{Version: Version, FindTools: driver.ToolPaths}}
	cmd := command("push REF", "Push the cnibench image to a registry, so a real cluster can pull it", cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string) error {
			c.Ref = args[0]
			return c.Run(cmd.Context(), cmd.OutOrStdout())
		})
	cmd.Long = image.PushHelp
	cmd.Flags().StringVar(&c.Archive, "archive", "", "push this archive (written by image build) instead of building one")
	cmd.Flags().BoolVar(&c.Insecure, "insecure", false, "allow a registry that speaks plain HTTP")
	cmd.Flags().BoolVar(&c.Build.WithTools, "with-tools", false, "build with this host's qperf, iperf3 and sockperf (without --archive)")
	cmd.Flags().StringVar(&c.Build.Binary, "binary", "", "static cnibench binary to package (default: this one; without --archive)")
	return cmd
}

func newImageBuildCmd() *cobra.Command {
	c := image.BuildCommand{BuildOptions: image.BuildOptions{Version: Version, FindTools: driver.ToolPaths}}
	cmd := command("build -o FILE", "Write an OCI image archive holding only this static cnibench binary", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error { return c.Run(cmd.Context(), cmd.OutOrStdout()) })
	cmd.Long = image.BuildHelp
	cmd.Flags().StringVarP(&c.Output, "output", "o", "", "archive to write")
	cmd.Flags().StringVar(&c.Ref, "ref", "", "image reference NAME:TAG (default "+image.DefaultRepository+":<version>-<sha>)")
	cmd.Flags().StringVar(&c.Binary, "binary", "", "static cnibench binary to package (default: this one)")
	cmd.Flags().BoolVar(&c.WithTools, "with-tools", false, "also carry this host's qperf, iperf3 and sockperf with their shared libraries (for k8s run --engine)")
	cmd.Flags().StringVar(&c.Push, "push", "", "then push the archive to this registry reference (see image push)")
	cmd.Flags().BoolVar(&c.Insecure, "insecure", false, "with --push: allow a registry that speaks plain HTTP")
	return cmd
}
