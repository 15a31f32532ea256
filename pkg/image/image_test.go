package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeStatic writes the smallest ELF header debug/elf accepts: an x86-64 or
// arm64 executable with no program headers, hence no interpreter and no
// dynamic section — exactly what CheckStatic must accept.
func fakeStatic(t *testing.T) string {
	t.Helper()
	var machine uint16
	switch runtime.GOARCH {
	case "amd64":
		machine = 62
	case "arm64":
		machine = 183
	default:
		t.Skipf("no ELF machine number for %s in this test", runtime.GOARCH)
	}
	h := make([]byte, 64)
	copy(h, "\x7fELF")
	h[4], h[5], h[6] = 2, 1, 1               // 64-bit, little endian, version 1
	binary.LittleEndian.PutUint16(h[16:], 2) // ET_EXEC
	binary.LittleEndian.PutUint16(h[18:], machine)
	binary.LittleEndian.PutUint32(h[20:], 1)
	binary.LittleEndian.PutUint16(h[52:], 64) // ehsize
	binary.LittleEndian.PutUint16(h[54:], 56) // phentsize
	binary.LittleEndian.PutUint16(h[58:], 64) // shentsize
	h = append(h, []byte("payload that must come back out of the layer")...)
	p := filepath.Join(t.TempDir(), "cnibench")
	if err := os.WriteFile(p, h, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckStatic(t *testing.T) {
	if err := CheckStatic(fakeStatic(t)); err != nil {
		t.Fatalf("static ELF rejected: %v", err)
	}
	notELF := filepath.Join(t.TempDir(), "x")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)
	if err := CheckStatic(notELF); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Fatalf("script accepted or wrong error: %v", err)
	}
	// /bin/sh on Debian is dynamically linked against libc.
	if err := CheckStatic("/bin/sh"); !errors.Is(err, ErrNotStatic) {
		if _, statErr := os.Stat("/bin/sh"); statErr != nil {
			t.Skip("no /bin/sh")
		}
		t.Fatalf("/bin/sh: want ErrNotStatic, got %v", err)
	}
}

func TestValidRef(t *testing.T) {
	for _, ok := range []string{"localhost/cnibench:v1", "cnibench:dev-0123abcd", "reg.example:5000/a/b-c:1.2_3"} {
		if err := ValidRef(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "cnibench", "Local/cnibench:1", "cnibench:", "cnibench@sha256:00", "a:b:c d"} {
		if err := ValidRef(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDefaultRef(t *testing.T) {
	p := fakeStatic(t)
	ref, err := DefaultRef(p, "v0.1-3-gabc+dirty")
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidRef(ref); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	sum := sha256.Sum256(b)
	want := DefaultRepository + ":v0.1-3-gabc_dirty-" + hex.EncodeToString(sum[:])[:12]
	if ref != want {
		t.Fatalf("ref %s, want %s", ref, want)
	}
}

func readTar(t *testing.T, b []byte) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files, hdrs := map[string][]byte{}, map[string]*tar.Header{}
	eachTarEntry(t, b, func(h *tar.Header, d []byte) { files[h.Name], hdrs[h.Name] = d, h })
	return files, hdrs
}

// eachTarEntry calls f with each entry of the tar archive b and its
// contents, in the archive's order.
func eachTarEntry(t *testing.T, b []byte, f func(h *tar.Header, d []byte)) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		d, _ := io.ReadAll(tr)
		f(h, d)
	}
}

func TestWriteArchive(t *testing.T) {
	bin := fakeStatic(t)
	const ref = "localhost/cnibench:test"
	var a, b bytes.Buffer
	info, err := Write(&a, Options{Binary: bin, Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(&b, Options{Binary: bin, Ref: ref}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two builds of the same binary differ: the archive is not reproducible")
	}
	if info.ArchiveSize != int64(a.Len()) {
		t.Errorf("ArchiveSize %d, wrote %d", info.ArchiveSize, a.Len())
	}

	files, hdrs := readTar(t, a.Bytes())
	for name, h := range hdrs {
		if h.ModTime.Unix() != 0 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d, want 0", name, h.ModTime, h.Uid, h.Gid)
		}
	}
	// Every blob is stored under its own digest.
	for name, data := range files {
		if strings.HasPrefix(name, "blobs/sha256/") && !strings.HasSuffix(name, "/") {
			sum := sha256.Sum256(data)
			if hex.EncodeToString(sum[:]) != strings.TrimPrefix(name, "blobs/sha256/") {
				t.Errorf("%s: content digest does not match its name", name)
			}
		}
	}
	blob := func(d string) []byte {
		data, ok := files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")]
		if !ok {
			t.Fatalf("blob %s missing", d)
		}
		return data
	}

	var idx ociIndex
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations["io.containerd.image.name"] != ref ||
		idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "test" {
		t.Fatalf("index: %+v", idx)
	}
	if idx.Manifests[0].Digest != info.ManifestDigest {
		t.Errorf("index names %s, Info says %s", idx.Manifests[0].Digest, info.ManifestDigest)
	}
	var m ociManifest
	if err := json.Unmarshal(blob(idx.Manifests[0].Digest), &m); err != nil {
		t.Fatal(err)
	}
	var cfg imageConfig
	if err := json.Unmarshal(blob(m.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != BinaryPath {
		t.Errorf("entrypoint %v", cfg.Config.Entrypoint)
	}
	if len(m.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(m.Layers))
	}
	gz := blob(m.Layers[0].Digest)
	if int64(len(gz)) != m.Layers[0].Size {
		t.Errorf("layer size %d, manifest says %d", len(gz), m.Layers[0].Size)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(layer); "sha256:"+hex.EncodeToString(sum[:]) != cfg.RootFS.DiffIDs[0] {
		t.Error("diff_id is not the digest of the uncompressed layer")
	}
	lfiles, lhdrs := readTar(t, layer)
	want, _ := os.ReadFile(bin)
	if !bytes.Equal(lfiles["cnibench"], want) {
		t.Error("layer's /cnibench differs from the binary")
	}
	if lhdrs["cnibench"].Mode != 0o755 {
		t.Errorf("/cnibench mode %o", lhdrs["cnibench"].Mode)
	}
	var regular []string
	for name, h := range lhdrs {
		if h.Typeflag == tar.TypeReg {
			regular = append(regular, name)
		}
	}
	if len(regular) != 1 {
		t.Errorf("layer holds files %v, want only cnibench", regular)
	}

	var dm []dockerEntry
	if err := json.Unmarshal(files["manifest.json"], &dm); err != nil || len(dm) != 1 || dm[0].RepoTags[0] != ref {
		t.Errorf("docker manifest.json: %v %+v", err, dm)
	}
}

func TestWriteRejects(t *testing.T) {
	var buf bytes.Buffer
	if _, err := Write(&buf, Options{Binary: fakeStatic(t), Ref: "NoTag"}); err == nil {
		t.Error("bad ref accepted")
	}
	if _, err := Write(&buf, Options{Binary: filepath.Join(t.TempDir(), "missing"), Ref: "a:b"}); err == nil {
		t.Error("missing binary accepted")
	}
	if buf.Len() != 0 {
		t.Error("a rejected build wrote bytes")
	}
}
