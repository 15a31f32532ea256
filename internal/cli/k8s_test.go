package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runK8sCLI runs cnibench with args, pointing every k8s command at a
// kubeconfig whose server cannot be reached, so a test that got past flag
// checking would fail loudly rather than touch a cluster.
func runK8sCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: x, user: u}}]\ncurrent-context: x\n"), 0o600)
	t.Setenv("KUBECONFIG", kc)
	t.Setenv("CNIBENCH_DB", filepath.Join(t.TempDir(), "r.db"))
	var out, errb bytes.Buffer
	err := Run(context.Background(), args, &out, &errb)
	return out.String() + errb.String(), err
}

func TestK8sRunRejectsBadInputBeforeTouchingTheCluster(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenarios", "pod-same-node,nodeport"}, `unknown scenario "nodeport"`},
		{[]string{"--test", "tcp_rr"}, `--test "tcp_rr"`},
		{[]string{"--msg-size", "1,huge"}, "--msg-size"},
		{[]string{"--test", "udp_bw", "--msg-size", "70000"}, "--msg-size for udp_bw"},
		{[]string{"--repeats", "0"}, "--repeats"},
		{[]string{"--image-pull-policy", "Sometimes"}, "--image-pull-policy"},
		{[]string{"--services", "50001"}, "--services 50001: must be 0-50000"},
		{[]string{"--engine", "netperf"}, `unknown engine "netperf"`},
		{[]string{"--engine", "qperf", "--test", "tcp_crr"}, "qperf has no tcp_crr test"},
		{[]string{"--engine", "builtin,sockperf", "--test", "tcp_lat", "--msg-size", "1"}, "sockperf's smallest message is 14 bytes"},
		{[]string{"--engine", "builtin,iperf3", "--test", "tcp_lat"}, "--engine iperf3 measures none of --test tcp_lat"},
	} {
		_, err := runK8sCLI(t, append([]string{"k8s", "run", "--image", "x:1"}, tc.args...)...)
		var u UsageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want a usage error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestK8sUnreachableClusterIsOneLine(t *testing.T) {
	_, err := runK8sCLI(t, "k8s", "info")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("want one line naming the API server, got %v", err)
	}
}

func TestImageBuildNeedsOutput(t *testing.T) {
	_, err := runK8sCLI(t, "image", "build")
	var u UsageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "-o FILE") {
		t.Errorf("got %v", err)
	}
	_, err = runK8sCLI(t, "image", "build", "-o", filepath.Join(t.TempDir(), "x.tar"), "--ref", "Bad Ref")
	if !errors.As(err, &u) {
		t.Errorf("bad ref: got %v", err)
	}
}

func TestImageBuildLeavesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	notStatic := filepath.Join(dir, "script")
	os.WriteFile(notStatic, []byte("#!/bin/sh\n"), 0o755)
	_, err := runK8sCLI(t, "image", "build", "-o", filepath.Join(dir, "img.tar"), "--binary", notStatic, "--ref", "a:b")
	if err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Fatalf("got %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("a failed build left files: %v", entries)
	}
}

// A tool missing on this host is the driver's one line, and no archive.
func TestImageBuildWithToolsNamesMissingTool(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir) // no tool anywhere
	out := filepath.Join(dir, "img.tar")
	_, err := runK8sCLI(t, "image", "build", "--with-tools", "-o", out, "--ref", "a:b")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "is not installed: apt-get install") ||
		!strings.Contains(err.Error(), "--with-tools") {
		t.Fatalf("want one line naming the apt package, got %v", err)
	}
	if _, serr := os.Stat(out); serr == nil {
		t.Error("a failed build wrote the archive")
	}
}
