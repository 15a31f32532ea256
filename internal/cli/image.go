package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cnibench/cnibench/pkg/atomicfile"
	"github.com/cnibench/cnibench/pkg/driver"
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
	var withTools bool
	cmd := &cobra.Command{
		Use:   "build -o FILE",
		Short: "Write an OCI image archive holding only this static cnibench binary",
		Long: `Writes an OCI image archive (also loadable by docker load) whose one layer
holds the static cnibench binary as /cnibench, the entrypoint. There is no base
image. Load it with 'ctr -n k8s.io images import FILE', 'k8slab import FILE'
or push it to a registry with any OCI tool.

The default reference is ` + image.DefaultRepository + `:<version>-<binary sha256 prefix>,
which is also the default --image of 'cnibench k8s run'.

--with-tools also carries this host's qperf, iperf3 and sockperf at their
paths, with their dynamic loader and every shared library they load (read
from their ELF dependencies), for 'k8s run --engine qperf|iperf3|sockperf'.
Its default tag ends in ` + image.ToolsTagSuffix + `.`,
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
			var tools []string
			if withTools {
				var err error
				if tools, err = toolPaths(); err != nil {
					return fmt.Errorf("image build --with-tools: %w", err)
				}
			}
			if ref == "" {
				r, err := image.DefaultRef(binary, Version)
				if err != nil {
					return err
				}
				ref = r
				if withTools {
					ref += image.ToolsTagSuffix
				}
			} else if err := image.ValidRef(ref); err != nil {
				return UsageError{fmt.Errorf("image build: --ref: %w", err)}
			}
			if err := image.CheckStatic(binary); err != nil {
				return fmt.Errorf("image build: %w", err)
			}
			var info *image.Info
			err := atomicfile.Write(out, 0o644, func(w io.Writer) (err error) {
				info, err = image.Write(w, image.Options{Binary: binary, Ref: ref, Tools: tools})
				return err
			})
			if err != nil {
				return fmt.Errorf("image build: %w", err)
			}
			var with string
			if withTools {
				with = fmt.Sprintf("; with %s: %d files", strings.Join(tools, " "), len(info.ToolFiles))
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s (manifest %s, layer %.1f MB gzip%s)\n",
				out, info.Ref, info.ManifestDigest, float64(info.LayerSize)/1e6, with)
			return err
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "archive to write")
	cmd.Flags().StringVar(&ref, "ref", "", "image reference NAME:TAG (default "+image.DefaultRepository+":<version>-<sha>)")
	cmd.Flags().StringVar(&binary, "binary", "", "static cnibench binary to package (default: this one)")
	cmd.Flags().BoolVar(&withTools, "with-tools", false, "also carry this host's qperf, iperf3 and sockperf with their shared libraries (for k8s run --engine)")
	return cmd
}

// toolPaths finds every reference tool's program on $PATH, in driver name
// order; a missing one is the driver's one-line "apt-get install" error.
func toolPaths() ([]string, error) {
	var out []string
	for _, name := range driver.Names() {
		d, err := driver.Lookup(name)
		if err != nil || name == "builtin" {
			continue
		}
		if err := d.Installed(); err != nil {
			return nil, err
		}
		p, err := exec.LookPath(name)
		if err != nil {
			return nil, err
		}
		if p, err = filepath.Abs(p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
