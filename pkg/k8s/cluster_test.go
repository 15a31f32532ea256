package k8s

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDetectCNI(t *testing.T) {
	annotated := corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"projectcalico.org/IPv4Address": "10.0.0.1/24"}}}
	for _, tc := range []struct {
		names []string
		nodes []corev1.Node
		want  string
	}{
		{[]string{"coredns-1", "kube-proxy-abc"}, nil, "unknown (bridge?)"},
		{[]string{"cilium-xyz", "cilium-operator-1", "coredns"}, nil, "cilium"},
		{[]string{"kube-ovn-cni-a", "ovs-ovn-b", "kube-ovn-controller"}, nil, "kube-ovn"},
		{[]string{"ovnkube-node-a"}, nil, "ovn-kubernetes"},
		{[]string{"canal-x"}, nil, "canal"},
		{[]string{"kube-flannel-ds"}, nil, "flannel"},
		{[]string{"calico-node", "cilium"}, nil, "calico+cilium"},
		{[]string{"coredns"}, []corev1.Node{annotated}, "calico"},
	} {
		if got := DetectCNI(tc.names, tc.nodes); got != tc.want {
			t.Errorf("%v: got %q want %q", tc.names, got, tc.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	fc := newFakeCluster(t, "n2", "n1")
	ctx := context.Background()
	fc.cs.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cilium-abcde", Namespace: "kube-system"}}, metav1.CreateOptions{})
	c, nodes, err := Fingerprint(ctx, fc.api)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || c.Nodes[0].Name != "n1" || c.Nodes[0].Kernel != "6.1.0-test" || c.Nodes[0].InternalIP != "10.250.0.3" {
		t.Errorf("nodes %+v", c.Nodes)
	}
	if c.CNI != "cilium" || c.Version != "v1.31.4" {
		t.Errorf("cni %q version %q", c.CNI, c.Version)
	}
	if s := c.Summary(); !strings.Contains(s, "Kubernetes v1.31.4, CNI cilium, 2 node(s), kernel 6.1.0-test (Debian") {
		t.Errorf("summary %q", s)
	}
}
