package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cnibench/cnibench/pkg/atomicfile"
)

// ErrInvalid is matched (errors.Is) by Build's errors about its options,
// which the user fixes by changing the command line.
var ErrInvalid = errors.New("invalid image build options")

// BuildOptions are `cnibench image build`'s settings as given.
type BuildOptions struct {
	Output  string // the archive to write (required)
	Ref     string // NAME:TAG; "" names it after the binary and Version
	Binary  string // the static binary to package; "" is the running one
	Version string // the binary's version, for the default tag
	// WithTools carries the reference tools FindTools returns (absolute
	// program paths) with their loader and shared libraries.
	WithTools bool
	FindTools func() ([]string, error)
}

// Built is what Build wrote.
type Built struct {
	*Info
	Output string
	Tools  []string // the programs carried with --with-tools
}

// Build checks o, then writes the archive all or nothing: a failure leaves
// no file at o.Output.
func Build(o BuildOptions) (*Built, error) {
	if o.Output == "" {
		return nil, fmt.Errorf("%w: image build: -o FILE is required (where to write the archive)", ErrInvalid)
	}
	if o.Ref != "" {
		if err := ValidRef(o.Ref); err != nil {
			return nil, fmt.Errorf("%w: image build: --ref: %w", ErrInvalid, err)
		}
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("image build: find this binary: %w; pass --binary", err)
		}
		o.Binary = exe
	}
	b := &Built{Output: o.Output}
	if o.WithTools {
		var err error
		if b.Tools, err = o.FindTools(); err != nil {
			return nil, fmt.Errorf("image build --with-tools: %w", err)
		}
	}
	if o.Ref == "" {
		r, err := DefaultRef(o.Binary, o.Version)
		if err != nil {
			return nil, err
		}
		o.Ref = r
		if o.WithTools {
			o.Ref += ToolsTagSuffix
		}
	}
	if err := CheckStatic(o.Binary); err != nil {
		return nil, fmt.Errorf("image build: %w", err)
	}
	err := atomicfile.Write(o.Output, 0o644, func(w io.Writer) (err error) {
		b.Info, err = Write(w, Options{Binary: o.Binary, Ref: o.Ref, Tools: b.Tools})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("image build: %w", err)
	}
	return b, nil
}

// BuildHelp is `cnibench image build --help`'s description.
const BuildHelp = `Writes an OCI image archive (also loadable by docker load) whose one layer
holds the static cnibench binary as /cnibench, the entrypoint. There is no base
image. Load it with 'ctr -n k8s.io images import FILE', 'k8slab import FILE'
or push it to a registry with --push REF (or 'cnibench image push').

The default reference is ` + DefaultRepository + `:<version>-<binary sha256 prefix>,
which is also the default --image of 'cnibench k8s run'.

--with-tools also carries this host's qperf, iperf3 and sockperf at their
paths, with their dynamic loader and every shared library they load (read
from their ELF dependencies), for 'k8s run --engine qperf|iperf3|sockperf'.
Its default tag ends in ` + ToolsTagSuffix + `.`

// BuildCommand is `cnibench image build`: write the archive, then, with
// Push, push it to that registry reference.
type BuildCommand struct {
	BuildOptions
	Push     string // "" = do not push
	Insecure bool   // the registry speaks plain HTTP
}

// Run builds and pushes, writing a line to w for each as it is done.
func (c BuildCommand) Run(ctx context.Context, w io.Writer) error {
	b, err := Build(c.BuildOptions)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, b)
	if c.Push == "" {
		return nil
	}
	return pushPrint(ctx, w, PushOptions{Archive: c.Output, Ref: c.Push, Insecure: c.Insecure})
}

// String is the one line `image build` prints.
func (b *Built) String() string {
	var with string
	if len(b.Tools) > 0 {
		with = fmt.Sprintf("; with %s: %d files", strings.Join(b.Tools, " "), len(b.ToolFiles))
	}
	return fmt.Sprintf("wrote %s: %s (manifest %s, layer %.1f MB gzip%s)",
		b.Output, b.Ref, b.ManifestDigest, float64(b.LayerSize)/1e6, with)
}
