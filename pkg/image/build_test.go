package image

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuildRefusesBadOptionsWritingNothing(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "img.tar")
	notStatic := filepath.Join(dir, "script")
	os.WriteFile(notStatic, []byte("#!/bin/sh\n"), 0o755)
	noTools := errors.New("qperf is not installed: apt-get install qperf")
	for _, tc := range []struct {
		name    string
		o       BuildOptions
		invalid bool
		want    string
	}{
		{"no output", BuildOptions{Binary: fakeStatic(t)}, true, "-o FILE is required"},
		{"bad ref", BuildOptions{Output: out, Ref: "Bad Ref", Binary: fakeStatic(t)}, true, "--ref"},
		{"not static", BuildOptions{Output: out, Ref: "a:b", Binary: notStatic}, false, "not an ELF"},
		{"missing tool", BuildOptions{Output: out, Ref: "a:b", Binary: fakeStatic(t), WithTools: true,
			FindTools: func() ([]string, error) { return nil, noTools }}, false, "image build --with-tools: qperf is not installed"},
	} {
		_, err := Build(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrInvalid) != tc.invalid {
			t.Errorf("%s: got %v, want an error containing %q (ErrInvalid: %v)", tc.name, err, tc.want, tc.invalid)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Fatalf("%s: an archive was written", tc.name)
		}
	}
}

func TestBuildNamesAndWritesTheArchive(t *testing.T) {
	bin := fakeStatic(t)
	out := filepath.Join(t.TempDir(), "img.tar")
	b, err := Build(BuildOptions{Output: out, Binary: bin, Version: "v1.2"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := DefaultRef(bin, "v1.2")
	if err != nil {
		t.Fatal(err)
	}
	if b.Ref != want || b.Tools != nil {
		t.Errorf("ref %q tools %v, want %q and no tools", b.Ref, b.Tools, want)
	}
	st, err := os.Stat(out)
	if err != nil || st.Size() != b.ArchiveSize {
		t.Fatalf("archive %v (err %v), Build says %d bytes", st, err, b.ArchiveSize)
	}
	line := b.String()
	if !strings.HasPrefix(line, "wrote "+out+": "+want+" (manifest sha256:") || strings.Contains(line, "with") {
		t.Errorf("summary line %q", line)
	}
}
