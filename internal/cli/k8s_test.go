package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unreachableCluster points every k8s command at a kubeconfig whose
// server cannot be reached, so a test that got past flag checking would
// fail loudly rather than touch a cluster, and keeps the results database
// in a temporary directory.
func unreachableCluster(t *testing.T) {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: x, user: u}}]\ncurrent-context: x\n"), 0o600)
	t.Setenv("KUBECONFIG", kc)
	t.Setenv("CNIBENCH_DB", filepath.Join(t.TempDir(), "r.db"))
}

func TestK8sRunRejectsBadInputBeforeTouchingTheCluster(t *testing.T) {
	unreachableCluster(t)
	wantUsageErrors(t, []usageCase{
		{[]string{"k8s", "run", "--image", "x:1", "--scenarios", "pod-same-node,nodeport"}, `unknown scenario "nodeport"`},
		{[]string{"k8s", "run", "--image", "x:1", "--test", "tcp_rr"}, `--test "tcp_rr"`},
		{[]string{"k8s", "run", "--image", "x:1", "--msg-size", "1,huge"}, "--msg-size"},
		{[]string{"k8s", "run", "--image", "x:1", "--test", "udp_bw", "--msg-size", "70000"}, "--msg-size for udp_bw"},
		{[]string{"k8s", "run", "--image", "x:1", "--repeats", "0"}, "--repeats"},
		{[]string{"k8s", "run", "--image", "x:1", "--image-pull-policy", "Sometimes"}, "--image-pull-policy"},
		{[]string{"k8s", "run", "--image", "x:1", "--services", "50001"}, "--services 50001: must be 0-50000"},
		{[]string{"k8s", "run", "--image", "x:1", "--engine", "netperf"}, `unknown engine "netperf"`},
		{[]string{"k8s", "run", "--image", "x:1", "--engine", "qperf", "--test", "tcp_crr"}, "qperf has no tcp_crr test"},
		{[]string{"k8s", "run", "--image", "x:1", "--engine", "builtin,sockperf", "--test", "tcp_lat", "--msg-size", "1"}, "sockperf's smallest message is 14 bytes"},
		{[]string{"k8s", "run", "--image", "x:1", "--engine", "builtin,iperf3", "--test", "tcp_lat"}, "--engine iperf3 measures none of --test tcp_lat"},
	})
}

func TestK8sLatencyRejectsBadInputBeforeTouchingTheCluster(t *testing.T) {
	unreachableCluster(t)
	wantUsageErrors(t, []usageCase{
		{[]string{"k8s", "latency", "--image", "x:1", "--trials", "0"}, "--trials 0: must be 1-1000"},
		{[]string{"k8s", "latency", "--image", "x:1", "--kinds", "service,ingress"}, `unknown kind "ingress"`},
		{[]string{"k8s", "latency", "--image", "x:1", "--services", "-1"}, "--services -1: must be 0-50000"},
		{[]string{"k8s", "latency", "--image", "x:1", "--timeout", "10ms"}, "--timeout 10ms"},
		{[]string{"k8s", "latency", "--image", "x:1", "--image-pull-policy", "Sometimes"}, "--image-pull-policy"},
		{[]string{"k8s", "latency-agent", "--target", "10.0.0.1:80"}, "want NAME=HOST:PORT"},
	})
}

func TestK8sUnreachableClusterIsOneLine(t *testing.T) {
	unreachableCluster(t)
	_, err := runCLI(t, "k8s", "info")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("want one line naming the API server, got %v", err)
	}
}

func TestImageBuildNeedsOutput(t *testing.T) {
	unreachableCluster(t)
	_, err := runCLI(t, "image", "build")
	var u UsageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "-o FILE") {
		t.Errorf("got %v", err)
	}
	_, err = runCLI(t, "image", "build", "-o", filepath.Join(t.TempDir(), "x.tar"), "--ref", "Bad Ref")
	if !errors.As(err, &u) {
		t.Errorf("bad ref: got %v", err)
	}
}

func TestImageBuildLeavesNothingOnFailure(t *testing.T) {
	unreachableCluster(t)
	dir := t.TempDir()
	notStatic := filepath.Join(dir, "script")
	os.WriteFile(notStatic, []byte("#!/bin/sh\n"), 0o755)
	_, err := runCLI(t, "image", "build", "-o", filepath.Join(dir, "img.tar"), "--binary", notStatic, "--ref", "a:b")
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
	unreachableCluster(t)
	dir := t.TempDir()
	t.Setenv("PATH", dir) // no tool anywhere
	out := filepath.Join(dir, "img.tar")
	_, err := runCLI(t, "image", "build", "--with-tools", "-o", out, "--ref", "a:b")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "is not installed: apt-get install") ||
		!strings.Contains(err.Error(), "--with-tools") {
		t.Fatalf("want one line naming the apt package, got %v", err)
	}
	if _, serr := os.Stat(out); serr == nil {
		t.Error("a failed build wrote the archive")
	}
}
