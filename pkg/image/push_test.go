package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/fixture"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// registry starts Debian's docker-registry (the CNCF distribution
// registry) on a free loopback port, storing in the test's directory,
// with htpasswd authentication when htpasswd is set. It stops with the
// test.
func registry(t *testing.T, htpasswd string) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		t.Skip("docker-registry not installed (apt-get install docker-registry; scripts/install-deps.sh does)")
	}
	addr := fixture.FreeAddr(t)
	dir := t.TempDir()
	auth := ""
	if htpasswd != "" {
		p := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(p, []byte(htpasswd), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: cnb\n    path: %s\n", p)
	}
	cfg := filepath.Join(dir, "config.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n%s",
		filepath.Join(dir, "data"), addr, auth)), 0o644)
	// /v2/ answers 401 with authentication: the registry's health check
	// answers 200 either way.
	fixture.Daemon(t, "http://"+addr+"/", bin, "serve", cfg)
	return addr
}

// Pushed to a real registry and pulled back, the image's digest is the
// one the archive holds; a second push of the same archive is idempotent.
func TestPushToRegistry(t *testing.T) {
	addr := registry(t, "")
	out := filepath.Join(t.TempDir(), "img.tar")
	b, err := Build(BuildOptions{Output: out, Binary: fakeStatic(t), Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	dst := addr + "/cnb/cnibench:v1"
	for i := 0; i < 2; i++ {
		p, err := Push(context.Background(), PushOptions{Archive: out, Ref: dst, Insecure: true})
		if err != nil {
			t.Fatal(err)
		}
		if p.Digest != b.ManifestDigest || p.Ref != addr+"/cnb/cnibench@"+b.ManifestDigest {
			t.Fatalf("pushed %+v, built manifest %s", p, b.ManifestDigest)
		}
	}
	ref, _ := name.ParseReference(dst, name.Insecure)
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d.String() != b.ManifestDigest {
		t.Errorf("pulled back %s, pushed %s", d, b.ManifestDigest)
	}
	cfg, err := img.ConfigFile()
	if err != nil || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != BinaryPath {
		t.Errorf("pulled config %+v, %v", cfg, err)
	}
}

// Credentials come from the keychain; a refusal and an unreachable
// registry are one-line errors, and a bad reference or archive is input
// the user fixes (ErrInvalid).
func TestPushRefusals(t *testing.T) {
	addr := registry(t, "cnb:$2a$05$CB0pvaLXCGhop2DCUEzWr.hqxAhfj5vhaKjyxuWaie.t05Or0tCzy\n") // cnb:secret
	out := filepath.Join(t.TempDir(), "img.tar")
	if _, err := Build(BuildOptions{Output: out, Binary: fakeStatic(t), Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err := Push(ctx, PushOptions{Archive: out, Ref: addr + "/cnb/x:v1", Insecure: true, Keychain: authn.NewMultiKeychain()})
	if !errors.Is(err, ErrRegistry) || !strings.Contains(err.Error(), "HTTP 401 Unauthorized") || strings.Contains(err.Error(), "\n") {
		t.Errorf("no credentials: %v", err)
	}
	good := staticKeychain{&authn.Basic{Username: "cnb", Password: "secret"}}
	if _, err := Push(ctx, PushOptions{Archive: out, Ref: addr + "/cnb/x:v1", Insecure: true, Keychain: good}); err != nil {
		t.Errorf("with credentials: %v", err)
	}
	_, err = Push(ctx, PushOptions{Archive: out, Ref: "127.0.0.1:1/cnb/x:v1", Insecure: true})
	if !errors.Is(err, ErrRegistry) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("unreachable: %v", err)
	}
	for _, o := range []PushOptions{{Archive: out, Ref: "Not A Ref"}, {Archive: out + ".missing", Ref: addr + "/x:y"}, {Archive: "/etc/hostname", Ref: addr + "/x:y"}} {
		if _, err := Push(ctx, o); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", o, err)
		}
	}
}

type staticKeychain struct{ a authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

// The commands write a line for each step as it is done: image build its
// archive then the push, image push (without --archive) the image it
// built then the push — and the build's line also when the push fails.
func TestCommandsPrintEachStep(t *testing.T) {
	addr := registry(t, "")
	archive := filepath.Join(t.TempDir(), "img.tar")
	build := BuildOptions{Binary: fakeStatic(t), Version: "v1"}
	withOutput := build
	withOutput.Output = archive
	for _, c := range []struct {
		name string
		cmd  interface {
			Run(context.Context, io.Writer) error
		}
		err   error    // want errors.Is
		lines []string // the printed lines' starts
	}{
		{"build --push", BuildCommand{BuildOptions: withOutput, Push: addr + "/cnb/b:v1", Insecure: true}, nil,
			[]string{"wrote " + archive + ": ", "pushed " + addr + "/cnb/b@sha256:"}},
		{"push", PushCommand{Ref: addr + "/cnb/p:v1", Insecure: true, Build: build}, nil,
			[]string{"built " + addr + "/cnb/p:v1 (manifest sha256:", "pushed " + addr + "/cnb/p@sha256:"}},
		{"push to nowhere", PushCommand{Ref: "127.0.0.1:1/cnb/p:v1", Insecure: true, Build: build}, ErrRegistry,
			[]string{"built 127.0.0.1:1/cnb/p:v1 "}},
	} {
		var out strings.Builder
		err := c.cmd.Run(context.Background(), &out)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		ok := errors.Is(err, c.err) && len(lines) == len(c.lines)
		for i := 0; ok && i < len(lines); i++ {
			ok = strings.HasPrefix(lines[i], c.lines[i])
		}
		if !ok {
			t.Errorf("%s: %v, printed:\n%s", c.name, err, out.String())
		}
	}
}
