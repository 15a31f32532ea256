package k8s

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kubeconfigTmpl = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://127.0.0.1:6443"}
- name: b
  cluster: {server: "https://127.0.0.1:7443"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx-a
  context: {cluster: a, user: u}
- name: ctx-b
  context: {cluster: b, user: u}
current-context: CURRENT
`

func writeKubeconfig(t *testing.T, current string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(p, []byte(strings.Replace(kubeconfigTmpl, "CURRENT", current, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConnectResolvesLikeKubectl(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // never fall back to in-cluster here

	envFile := writeKubeconfig(t, "ctx-b")
	t.Setenv("KUBECONFIG", envFile)
	c, err := Connect("", "")
	if err != nil || c.Context != "ctx-b" || c.Server != "https://127.0.0.1:7443" {
		t.Fatalf("KUBECONFIG: %+v %v", c, err)
	}
	c, err = Connect("", "ctx-a")
	if err != nil || c.Context != "ctx-a" || c.Server != "https://127.0.0.1:6443" {
		t.Fatalf("--context over KUBECONFIG: %+v %v", c, err)
	}
	explicit := writeKubeconfig(t, "ctx-a")
	c, err = Connect(explicit, "")
	if err != nil || c.Context != "ctx-a" {
		t.Fatalf("--kubeconfig over KUBECONFIG: %+v %v", c, err)
	}
	if _, err := Connect(explicit, "nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown context: %v", err)
	}

	// ~/.kube/config is clientcmd's own fallback (its path is fixed when
	// the package loads, so a test cannot move HOME under it); a
	// KUBECONFIG naming only missing files is the same "nothing there" case.
	t.Setenv("KUBECONFIG", filepath.Join(home, "missing"))
	if _, err := Connect("", ""); err == nil || !strings.Contains(err.Error(), "no Kubernetes cluster configured") {
		t.Errorf("nothing configured: %v", err)
	}
}
