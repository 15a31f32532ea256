package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Pushing the image to a registry, so a real cluster can pull it: what
// `cnibench image push` and `image build --push` do, with
// go-containerregistry. The archive's own OCI manifest is pushed as it is,
// so the digest the registry serves is the digest `image build` printed.

// PushOptions say what to push where.
type PushOptions struct {
	// Archive is an archive `image build` wrote.
	Archive string
	// Ref is the destination, e.g. registry.example.com/team/cnibench:v1.
	Ref string
	// Insecure allows a registry that speaks plain HTTP (a test or lab
	// registry); otherwise only HTTPS is used.
	Insecure bool
	// Keychain finds credentials; nil is the usual Docker configuration
	// ($DOCKER_CONFIG or ~/.docker/config.json, with its credential
	// helpers).
	Keychain authn.Keychain
}

// Pushed is what Push did.
type Pushed struct {
	Ref    string // the reference pushed, with its digest
	Digest string
	Bytes  int64 // the archive's size
	Took   time.Duration
}

func (p *Pushed) String() string {
	return fmt.Sprintf("pushed %s (%.1f MB archive) in %v", p.Ref, float64(p.Bytes)/1e6, p.Took.Round(time.Millisecond))
}

// ErrRegistry is wrapped by a registry's refusal (authentication, an
// unknown repository) and by a registry that cannot be reached.
var ErrRegistry = errors.New("registry")

// Push checks o, then uploads the archive's image to the registry.
func Push(ctx context.Context, o PushOptions) (*Pushed, error) {
	var opts []name.Option
	if o.Insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(o.Ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: image push: %q is not an image reference (want REGISTRY/REPOSITORY:TAG): %v", ErrInvalid, o.Ref, err)
	}
	fi, err := os.Stat(o.Archive)
	if err != nil {
		return nil, fmt.Errorf("%w: image push: archive: %w", ErrInvalid, err)
	}
	start := time.Now()
	dir, err := os.MkdirTemp("", "cnibench-push-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := extractLayout(o.Archive, dir); err != nil {
		return nil, fmt.Errorf("%w: image push: %s is not an archive `cnibench image build` wrote: %v", ErrInvalid, o.Archive, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image push: read %s: %w", o.Archive, err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		return nil, fmt.Errorf("image push: %s: want one image in the archive (%v)", o.Archive, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("image push: read %s: %w", o.Archive, err)
	}
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)); err != nil {
		return nil, fmt.Errorf("image push %s: %w: %s", ref, ErrRegistry, registryReason(err))
	}
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	return &Pushed{Ref: ref.Context().Digest(d.String()).String(), Digest: d.String(), Bytes: fi.Size(), Took: time.Since(start)}, nil
}

// registryReason is the registry's answer on one line: its error codes
// when it gave some, the status otherwise (a HEAD answer has no body), and
// for a refusal where credentials come from.
func registryReason(err error) string {
	var te *transport.Error
	if !errors.As(err, &te) {
		return strings.ReplaceAll(err.Error(), "\n", " ")
	}
	s := fmt.Sprintf("HTTP %d %s", te.StatusCode, http.StatusText(te.StatusCode))
	var parts []string
	for _, d := range te.Errors {
		parts = append(parts, fmt.Sprintf("%s: %s", d.Code, d.Message))
	}
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, "; ")
	}
	if te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden {
		s += " (credentials come from $DOCKER_CONFIG or ~/.docker/config.json and its credential helpers: `docker login` writes them)"
	}
	return s
}

// extractLayout unpacks the archive's OCI layout (oci-layout, index.json
// and the blobs) into dir; anything else in it (docker load's
// manifest.json) is skipped, and no entry may leave dir.
func extractLayout(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	seen := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		p := path.Clean(h.Name)
		if h.Typeflag != tar.TypeReg || !(p == "oci-layout" || p == "index.json" || strings.HasPrefix(p, "blobs/sha256/")) {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		seen++
	}
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		return errors.New("no index.json")
	}
	if seen < 3 {
		return errors.New("no blobs")
	}
	return nil
}

// PushHelp is `cnibench image push --help`'s description.
const PushHelp = `Pushes the image to REF (REGISTRY/REPOSITORY:TAG): the archive given with
--archive, or one built on the spot from this binary (--with-tools: with
this host's qperf, iperf3 and sockperf). The manifest is pushed as built, so
the registry serves the digest 'image build' printed. Credentials come from
the usual Docker configuration ($DOCKER_CONFIG or ~/.docker/config.json and
its credential helpers). Then: cnibench k8s run --image REF.`

// PushCommand is `cnibench image push REF`: push Archive, or, without
// one, an image of this binary built on the spot (with the reference
// tools when WithTools) into a temporary archive.
type PushCommand struct {
	Ref      string
	Archive  string
	Insecure bool
	Build    BuildOptions // Output is ignored: the temporary archive
}

// Run checks the reference before building anything, then builds (when
// needed) and pushes, writing a line to w for each as it is done: a push
// that fails after a build still shows what was built.
func (c PushCommand) Run(ctx context.Context, w io.Writer) error {
	if _, err := name.ParseReference(c.Ref); err != nil {
		return fmt.Errorf("%w: image push: %q is not an image reference (want REGISTRY/REPOSITORY:TAG): %v", ErrInvalid, c.Ref, err)
	}
	archive := c.Archive
	if archive == "" {
		dir, err := os.MkdirTemp("", "cnibench-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		b := c.Build
		b.Output = filepath.Join(dir, "image.tar")
		if b.Ref == "" {
			b.Ref = c.Ref // the archive names the image it becomes
			if _, err := name.NewTag(c.Ref); err != nil || ValidRef(c.Ref) != nil {
				b.Ref = "" // a digest reference, or one ValidRef is stricter about
			}
		}
		built, err := Build(b)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "built %s (manifest %s, layer %.1f MB gzip)\n", built.Ref, built.ManifestDigest, float64(built.LayerSize)/1e6)
		archive = b.Output
	}
	return pushPrint(ctx, w, PushOptions{Archive: archive, Ref: c.Ref, Insecure: c.Insecure})
}

// pushPrint pushes and writes the line saying what was pushed.
func pushPrint(ctx context.Context, w io.Writer, o PushOptions) error {
	p, err := Push(ctx, o)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, p)
	return err
}
