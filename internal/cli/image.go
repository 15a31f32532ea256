package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/image"
)

func newImageCmd() *cobra.Command {
	return group("image", "Build the cnibench container image (for Kubernetes runs)", "", newImageBuildCmd())
}

func newImageBuildCmd() *cobra.Command {
	o := image.BuildOptions{Version: Version, FindTools: driver.ToolPaths}
	cmd := command("build -o FILE", "Write an OCI image archive holding only this static cnibench binary", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			b, err := image.Build(o)
			if err != nil {
				return usage(err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), b)
			return err
		})
	cmd.Long = `Writes an OCI image archive (also loadable by docker load) whose one layer
holds the static cnibench binary as /cnibench, the entrypoint. There is no base
image. Load it with 'ctr -n k8s.io images import FILE', 'k8slab import FILE'
or push it to a registry with any OCI tool.

The default reference is ` + image.DefaultRepository + `:<version>-<binary sha256 prefix>,
which is also the default --image of 'cnibench k8s run'.

--with-tools also carries this host's qperf, iperf3 and sockperf at their
paths, with their dynamic loader and every shared library they load (read
from their ELF dependencies), for 'k8s run --engine qperf|iperf3|sockperf'.
Its default tag ends in ` + image.ToolsTagSuffix + `.`
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "archive to write")
	cmd.Flags().StringVar(&o.Ref, "ref", "", "image reference NAME:TAG (default "+image.DefaultRepository+":<version>-<sha>)")
	cmd.Flags().StringVar(&o.Binary, "binary", "", "static cnibench binary to package (default: this one)")
	cmd.Flags().BoolVar(&o.WithTools, "with-tools", false, "also carry this host's qperf, iperf3 and sockperf with their shared libraries (for k8s run --engine)")
	return cmd
}
