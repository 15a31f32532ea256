package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/atomicfile"
	"github.com/cnibench/cnibench/pkg/image"
)

func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build the cnibench container image (for Kubernetes runs)",
	}
	cmd.AddCommand(newImageBuildCmd())
	return cmd
}

func newImageBuildCmd() *cobra.Command {
	var out, ref, binary string
	cmd := &cobra.Command{
		Use:   "build -o FILE",
		Short: "Write an OCI image archive holding only this static cnibench binary",
		Long: `Writes an OCI image archive (also loadable by docker load) whose one layer
holds the static cnibench binary as /cnibench, the entrypoint. There is no base
image. Load it with 'ctr -n k8s.io images import FILE', 'k8slab import FILE'
or push it to a registry with any OCI tool.

The default reference is ` + image.DefaultRepository + `:<version>-<binary sha256 prefix>,
which is also the default --image of 'cnibench k8s run'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return UsageError{errors.New("image build: -o FILE is required (where to write the archive)")}
			}
			if binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("image build: find this binary: %w; pass --binary", err)
				}
				binary = exe
			}
			if ref == "" {
				r, err := image.DefaultRef(binary, Version)
				if err != nil {
					return err
				}
				ref = r
			} else if err := image.ValidRef(ref); err != nil {
				return UsageError{fmt.Errorf("image build: --ref: %w", err)}
			}
			if err := image.CheckStatic(binary); err != nil {
				return fmt.Errorf("image build: %w", err)
			}
			var info *image.Info
			err := atomicfile.Write(out, 0o644, func(w io.Writer) (err error) {
				info, err = image.Write(w, image.Options{Binary: binary, Ref: ref})
				return err
			})
			if err != nil {
				return fmt.Errorf("image build: %w", err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s (manifest %s, layer %.1f MB gzip)\n",
				out, info.Ref, info.ManifestDigest, float64(info.LayerSize)/1e6)
			return err
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "archive to write")
	cmd.Flags().StringVar(&ref, "ref", "", "image reference NAME:TAG (default "+image.DefaultRepository+":<version>-<sha>)")
	cmd.Flags().StringVar(&binary, "binary", "", "static cnibench binary to package (default: this one)")
	return cmd
}
