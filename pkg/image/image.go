// Package image writes the cnibench container image: an OCI image layout in
// a tar archive holding one layer with the static cnibench binary and nothing
// else — no base image, no shell, no registry. `ctr images import` (and so
// `k8slab import`) and `docker load` read it.
//
// The archive is reproducible: every mtime is 0, owners are root, entries are
// sorted and the gzip header carries no time or name, so the same binary
// always gives the same image digest.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"
)

// BinaryPath is where the binary lives inside the image; it is also the
// entrypoint, so pods name only the subcommand in args.
const BinaryPath = "/cnibench"

// DefaultRepository is the image name used when the user gives none. The
// "localhost/" prefix makes it plain that the image is never pulled.
const DefaultRepository = "localhost/cnibench"

// Media types of the OCI image spec, v1.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Options say what to put in the image.
type Options struct {
	// Binary is the path of the cnibench executable to package. It must be
	// statically linked: the image has no libc.
	Binary string
	// Ref is the full image reference, e.g. localhost/cnibench:v1. Empty
	// means DefaultRef of the binary.
	Ref string
	// Tools are absolute paths of dynamically linked programs (the
	// reference tools qperf, iperf3, sockperf) to carry at the same paths,
	// with their interpreter and every library they load (see Resolver);
	// empty means the binary alone.
	Tools []string
	// Resolver finds the tools' libraries; nil means HostResolver().
	Resolver *Resolver
}

// Info describes a written image.
type Info struct {
	Ref            string // full reference the archive names
	ManifestDigest string // sha256:… of the manifest, the image's identity
	LayerSize      int64  // compressed layer size in bytes
	ArchiveSize    int64
	// ToolFiles are the files carried for Options.Tools (programs,
	// interpreter, libraries), as the loader names them; nil without tools.
	ToolFiles []string
}

// ToolsTagSuffix ends the default tag of an image built with the tools, so
// `k8s run --engine qperf` and `image build --with-tools` agree on its name
// and it never stands in for the plain image.
const ToolsTagSuffix = "-tools"

// refRE is deliberately stricter than the distribution grammar: lowercase
// path components and a tag, which is all cnibench needs and rules out
// digests (an archive cannot be imported by digest).
var refRE = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// ValidRef checks that ref is name:tag in the form an OCI archive can carry.
func ValidRef(ref string) error {
	if !refRE.MatchString(ref) {
		return fmt.Errorf("image reference %q is not NAME:TAG (lowercase name, tag of letters, digits, '.', '_', '-'), e.g. %s:v1", ref, DefaultRepository)
	}
	return nil
}

// DefaultRef names the image of the binary at path: the repository, then a
// tag built from the cnibench version and the first 12 hex digits of the
// binary's sha256. Tying the tag to the content means `k8s run` and
// `image build` agree on the name without being told, and a rebuilt binary
// never hides behind a stale image cached on a node under the same tag.
func DefaultRef(path, version string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("image tag: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("image tag: read %s: %w", path, err)
	}
	return DefaultRepository + ":" + tagSafe(version) + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// tagSafe maps a version string onto the characters a tag allows.
func tagSafe(v string) string {
	var b strings.Builder
	for _, c := range v {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.TrimLeft(b.String(), ".-")
	if s == "" {
		s = "dev"
	}
	if len(s) > 100 {
		s = s[:100]
	}
	return s
}

// ErrNotStatic is returned for a binary that needs a dynamic loader.
var ErrNotStatic = errors.New("binary is dynamically linked")

// CheckStatic verifies that path is an ELF executable for this machine's
// architecture with no program interpreter and no shared-library
// dependencies, i.e. it runs in an image with nothing else in it.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	if want := goarchMachine(); want != elf.EM_NONE && f.Machine != want {
		return fmt.Errorf("%s is built for %v, this machine is %s", path, f.Machine, runtime.GOARCH)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: %w (it has a program interpreter); build it with CGO_ENABLED=0 (make build does)", path, ErrNotStatic)
		}
	}
	libs, err := f.ImportedLibraries()
	if err == nil && len(libs) > 0 {
		return fmt.Errorf("%s: %w (needs %s); build it with CGO_ENABLED=0 (make build does)", path, ErrNotStatic, strings.Join(libs, ", "))
	}
	return nil
}

func goarchMachine() elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}

// Write packages the binary as an OCI archive into w.
func Write(w io.Writer, o Options) (*Info, error) {
	if err := CheckStatic(o.Binary); err != nil {
		return nil, err
	}
	if err := ValidRef(o.Ref); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	var extra map[string]fileEntry
	var toolFiles []string
	env := []string{"PATH=/"}
	if len(o.Tools) > 0 {
		res := o.Resolver
		if res == nil {
			res = HostResolver()
		}
		if extra, toolFiles, env, err = toolEntries(res, o.Tools); err != nil {
			return nil, err
		}
	}
	layer, err := layerTar(bin, extra)
	if err != nil {
		return nil, err
	}
	layerGz, err := gzipDeterministic(layer)
	if err != nil {
		return nil, err
	}

	config, err := json.Marshal(imageConfig{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config: containerConfig{
			Entrypoint: []string{BinaryPath},
			Env:        env,
			WorkingDir: "/",
			Labels:     map[string]string{"org.opencontainers.image.title": "cnibench"},
		},
		RootFS:  rootFS{Type: "layers", DiffIDs: []string{digest(layer)}},
		History: []history{{CreatedBy: "cnibench image build", Created: time.Unix(0, 0).UTC()}},
	})
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal(ociManifest{
		SchemaVersion: 2,
		MediaType:     mediaManifest,
		Config:        descriptor{MediaType: mediaConfig, Digest: digest(config), Size: int64(len(config))},
		Layers:        []descriptor{{MediaType: mediaLayerGz, Digest: digest(layerGz), Size: int64(len(layerGz))}},
	})
	if err != nil {
		return nil, err
	}
	tag := o.Ref[strings.LastIndex(o.Ref, ":")+1:]
	index, err := json.Marshal(ociIndex{
		SchemaVersion: 2,
		MediaType:     mediaIndex,
		Manifests: []descriptor{{
			MediaType: mediaManifest, Digest: digest(manifest), Size: int64(len(manifest)),
			Platform: &platform{Architecture: runtime.GOARCH, OS: "linux"},
			// containerd names the image from the first annotation; the
			// OCI one carries only the tag, per the image-layout spec.
			Annotations: map[string]string{
				"io.containerd.image.name":          o.Ref,
				"org.opencontainers.image.ref.name": tag,
			},
		}},
	})
	if err != nil {
		return nil, err
	}
	// docker load reads manifest.json; containerd ignores it when index.json
	// is present, so one archive serves both.
	dockerManifest, err := json.Marshal([]dockerEntry{{
		Config:   "blobs/sha256/" + hexOf(config),
		RepoTags: []string{o.Ref},
		Layers:   []string{"blobs/sha256/" + hexOf(layerGz)},
	}})
	if err != nil {
		return nil, err
	}

	cw := &countWriter{w: w}
	tw := tar.NewWriter(cw)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"manifest.json", dockerManifest},
		{"blobs/sha256/" + hexOf(config), config},
		{"blobs/sha256/" + hexOf(manifest), manifest},
		{"blobs/sha256/" + hexOf(layerGz), layerGz},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(dirHeader(d, 0o755)); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := writeFile(tw, f.name, 0o644, f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return &Info{Ref: o.Ref, ManifestDigest: digest(manifest), LayerSize: int64(len(layerGz)), ArchiveSize: cw.n, ToolFiles: toolFiles}, nil
}

// toolEntries resolves every tool's closure and returns the layer entries
// that carry it, the files (as the loader names them) and the image's
// environment: PATH with the tools' directories after "/", and
// LD_LIBRARY_PATH with the libraries' directories, so the image does not
// depend on a loader cache it does not carry.
func toolEntries(res *Resolver, tools []string) (map[string]fileEntry, []string, []string, error) {
	seen := map[string]bool{}
	var files []string
	binDirs, libDirs := []string{"/"}, []string{}
	addDir := func(list *[]string, d string) {
		for _, x := range *list {
			if x == d {
				return
			}
		}
		*list = append(*list, d)
	}
	for _, t := range tools {
		closure, err := res.Closure(t)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("tool %s: %w", t, err)
		}
		addDir(&binDirs, path.Dir(t))
		for _, f := range closure {
			if f != t {
				addDir(&libDirs, path.Dir(f))
			}
			if !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
	}
	sort.Strings(files)
	entries, err := collect(res.root(), files)
	if err != nil {
		return nil, nil, nil, err
	}
	if _, clash := entries[strings.TrimPrefix(BinaryPath, "/")]; clash {
		return nil, nil, nil, fmt.Errorf("a tool's files include %s, which is the cnibench binary's place", BinaryPath)
	}
	sort.Strings(libDirs)
	env := []string{"PATH=" + strings.Join(binDirs, ":")}
	if len(libDirs) > 0 {
		env = append(env, "LD_LIBRARY_PATH="+strings.Join(libDirs, ":"))
	}
	return entries, files, env, nil
}

// layerTar is the image's file system: the binary, plus the empty
// directories a runtime expects to mount over (/proc, /sys, /dev, /etc for
// the resolv.conf and hosts files the kubelet injects) and a /tmp, plus
// extra (the tools' files, see collect). Entries are written sorted by
// name — a parent directory sorts before what it holds — with the times
// and owners fixed, so the same inputs give the same bytes.
func layerTar(bin []byte, extra map[string]fileEntry) ([]byte, error) {
	all := map[string]fileEntry{}
	for _, d := range []struct {
		name string
		mode int64
	}{{"dev/", 0o755}, {"etc/", 0o755}, {"proc/", 0o555}, {"sys/", 0o555}, {"tmp/", 0o1777}} {
		all[d.name] = fileEntry{Name: d.name, Type: tar.TypeDir, Mode: d.mode}
	}
	for name, e := range extra {
		if _, ok := all[name]; !ok {
			all[name] = e
		}
	}
	binName := strings.TrimPrefix(BinaryPath, "/")
	all[binName] = fileEntry{Name: binName, Type: tar.TypeReg, Mode: 0o755}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := all[n]
		var err error
		switch {
		case n == binName:
			err = writeFile(tw, n, e.Mode, bin)
		case e.Type == tar.TypeDir:
			err = tw.WriteHeader(dirHeader(n, e.Mode))
		case e.Type == tar.TypeSymlink:
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: n, Linkname: e.Link, Mode: 0o777,
				ModTime: time.Unix(0, 0), Uname: "root", Gname: "root", Format: tar.FormatPAX})
		default:
			var data []byte
			if data, err = os.ReadFile(e.Src); err == nil {
				err = writeFile(tw, n, e.Mode, data)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", n, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func dirHeader(name string, mode int64) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: time.Unix(0, 0), Uname: "root", Gname: "root", Format: tar.FormatPAX}
}

func writeFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0), Uname: "root", Gname: "root", Format: tar.FormatPAX}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// gzipDeterministic compresses with an empty header (no name, mtime 0), so
// the output depends on the input bytes only.
func gzipDeterministic(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zw.ModTime = time.Time{}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func hexOf(b []byte) string  { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
func digest(b []byte) string { return "sha256:" + hexOf(b) }

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// JSON documents of the OCI image spec, only the fields cnibench writes.
type (
	descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Platform    *platform         `json:"platform,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	platform struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	}
	ociIndex struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Manifests     []descriptor `json:"manifests"`
	}
	ociManifest struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Config        descriptor   `json:"config"`
		Layers        []descriptor `json:"layers"`
	}
	imageConfig struct {
		Architecture string          `json:"architecture"`
		OS           string          `json:"os"`
		Config       containerConfig `json:"config"`
		RootFS       rootFS          `json:"rootfs"`
		History      []history       `json:"history"`
	}
	containerConfig struct {
		Entrypoint []string          `json:"Entrypoint"`
		Env        []string          `json:"Env"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels,omitempty"`
	}
	rootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	}
	history struct {
		Created   time.Time `json:"created"`
		CreatedBy string    `json:"created_by"`
	}
	dockerEntry struct {
		Config   string   `json:"Config"`
		RepoTags []string `json:"RepoTags"`
		Layers   []string `json:"Layers"`
	}
)
