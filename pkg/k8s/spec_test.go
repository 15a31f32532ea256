package k8s

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

var testPO = PodOptions{RunID: "ab12", Namespace: "cnibench", Image: "localhost/cnibench:x", PullPolicy: corev1.PullNever}

func checkEngineSecurity(t *testing.T, name string, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("%s: capabilities %+v, want drop ALL and add none", name, sc)
		return
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s: privileged", name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: privilege escalation allowed", name)
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("%s: may run as root", name)
	}
}

func TestServerPodSpec(t *testing.T) {
	p := Placement{Scenario: ScenarioCrossNode, ClientNode: "n1", ServerNode: "n2"}
	pod := ServerPod(testPO, p)
	if pod.Name != "cnb-ab12-pod-cross-node-srv" || pod.Namespace != "cnibench" {
		t.Errorf("name %s/%s", pod.Namespace, pod.Name)
	}
	if pinnedNode(pod) != "n2" || pod.Spec.NodeName != "" {
		t.Errorf("pinned to %q (nodeName %q), want affinity to n2", pinnedNode(pod), pod.Spec.NodeName)
	}
	if pod.Spec.HostNetwork {
		t.Error("pod scenario on the host network")
	}
	c := pod.Spec.Containers[0]
	if c.Image != testPO.Image || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("image %s policy %s", c.Image, c.ImagePullPolicy)
	}
	if !slices.Equal(c.Args, []string{"server", "--listen", ":7420"}) {
		t.Errorf("args %v", c.Args)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.TCPSocket == nil || c.ReadinessProbe.TCPSocket.Port.IntValue() != 7420 {
		t.Errorf("readiness probe %+v", c.ReadinessProbe)
	}
	protos := map[corev1.Protocol]int32{}
	for _, port := range c.Ports {
		protos[port.Protocol] = port.ContainerPort
	}
	if protos[corev1.ProtocolTCP] != 7420 || protos[corev1.ProtocolUDP] != 7420 {
		t.Errorf("ports %v, want TCP and UDP 7420", c.Ports)
	}
	checkEngineSecurity(t, pod.Name, c)
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the engine pod gets an API token it does not need")
	}
	sel := labels.SelectorFromSet(pod.Labels)
	if !sel.Matches(labels.Set(pod.Labels)) || pod.Labels[LabelManagedBy] != ManagedBy || pod.Labels[LabelRun] != "ab12" {
		t.Errorf("labels %v", pod.Labels)
	}
}

func TestHostNetworkPods(t *testing.T) {
	p := Placement{Scenario: ScenarioHost, ClientNode: "n1", ServerNode: "n2", HostNetwork: true}
	srv, cli := ServerPod(testPO, p), ClientPod(testPO, p, 3, "10.250.0.3", ClientArgs{Tests: []string{"tcp_lat"}}, 60)
	if !srv.Spec.HostNetwork || !cli.Spec.HostNetwork {
		t.Fatal("host-network pods are not on the host network")
	}
	if pinnedNode(srv) != "n2" || pinnedNode(cli) != "n1" {
		t.Errorf("server on %s, client on %s", pinnedNode(srv), pinnedNode(cli))
	}
	// The host network gives no extra privilege to the engine.
	checkEngineSecurity(t, srv.Name, srv.Spec.Containers[0])
	checkEngineSecurity(t, cli.Name, cli.Spec.Containers[0])
}

func TestClientPodSpec(t *testing.T) {
	p := Placement{Scenario: ScenarioSameNode, ClientNode: "n1", ServerNode: "n1"}
	args := ClientArgs{Tests: []string{"tcp_lat", "udp_bw"}, MsgSizes: "1,1K", Duration: "2s", Warmup: "500ms", Parallel: 2}
	pod := ClientPod(testPO, p, 2, "10.244.1.7", args, 300)
	if pod.Name != "cnb-ab12-pod-same-node-cli-2" || pod.Labels[LabelRole] != "client" {
		t.Errorf("name %s labels %v", pod.Name, pod.Labels)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds != 300 {
		t.Errorf("restart %s deadline %v", pod.Spec.RestartPolicy, pod.Spec.ActiveDeadlineSeconds)
	}
	want := "client --server 10.244.1.7 --port 7420 --test tcp_lat,udp_bw --msg-size 1,1K --duration 2s --warmup 500ms --parallel 2 --log-stdout --json"
	if got := strings.Join(pod.Spec.Containers[0].Args, " "); got != want {
		t.Errorf("args\n got %s\nwant %s", got, want)
	}
	if pinnedNode(pod) != "n1" {
		t.Errorf("client pinned to %q", pinnedNode(pod))
	}
	checkEngineSecurity(t, pod.Name, pod.Spec.Containers[0])
}

func TestServiceSelectsOnlyItsServer(t *testing.T) {
	svc := ServiceSpec(testPO)
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	for _, sc := range Scenarios {
		p := Placement{Scenario: sc, ClientNode: "n1", ServerNode: "n2"}
		srv := ServerPod(testPO, p)
		if got := sel.Matches(labels.Set(srv.Labels)); got != (sc == ScenarioService) {
			t.Errorf("service selects %s server: %v", sc, got)
		}
		cli := ClientPod(testPO, p, 1, "x", ClientArgs{}, 1)
		if sel.Matches(labels.Set(cli.Labels)) {
			t.Errorf("service selects the %s client", sc)
		}
	}
	other := testPO
	other.RunID = "zz99"
	if sel.Matches(labels.Set(ServerPod(other, Placement{Scenario: ScenarioService}).Labels)) {
		t.Error("service selects another run's server")
	}
	if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Protocol == svc.Spec.Ports[1].Protocol {
		t.Errorf("ports %+v, want one TCP and one UDP", svc.Spec.Ports)
	}
}

func TestAuditDaemonSetIsReadOnly(t *testing.T) {
	ds := AuditDaemonSet(testPO, []string{"--profile", "latency"})
	spec := ds.Spec.Template.Spec
	if !labels.SelectorFromSet(ds.Spec.Selector.MatchLabels).Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Fatal("selector does not match the template")
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "" {
		t.Errorf("tolerations %+v, want all taints (every node)", spec.Tolerations)
	}
	for _, v := range spec.Volumes {
		if v.HostPath == nil || (v.HostPath.Path != "/proc" && v.HostPath.Path != "/sys") {
			t.Errorf("volume %+v: only /proc and /sys hostPaths expected", v)
		}
	}
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, c := range all {
		for _, m := range c.VolumeMounts {
			if !m.ReadOnly || !strings.HasPrefix(m.MountPath, auditRoot+"/") {
				t.Errorf("%s: mount %+v is writable or outside %s", c.Name, m, auditRoot)
			}
		}
		sc := c.SecurityContext
		if sc == nil || (sc.Privileged != nil && *sc.Privileged) || len(sc.Capabilities.Add) != 0 ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: security context %+v", c.Name, sc)
		}
	}
	if got := strings.Join(spec.InitContainers[0].Args, " "); got != "tune audit --json --root /host --profile latency" {
		t.Errorf("audit args %q", got)
	}
	if spec.HostPID || spec.HostIPC {
		t.Error("audit pods share host PID/IPC namespaces")
	}
}

func TestPodsReadTheRunToken(t *testing.T) {
	p := Placement{Scenario: ScenarioCrossNode, ServerNode: "n1", ClientNode: "n2"}
	po := testPO
	po.TokenSecret = TokenSecretName(po.RunID)
	for _, pod := range []*corev1.Pod{ServerPod(po, p), ClientPod(po, p, 1, "10.0.0.1", ClientArgs{}, 10)} {
		env := pod.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != "CNIBENCH_TOKEN" || env[0].ValueFrom.SecretKeyRef.Name != po.TokenSecret || env[0].ValueFrom.SecretKeyRef.Key != TokenKey {
			t.Errorf("%s: env %+v", pod.Name, env)
		}
	}
	if env := ServerPod(testPO, p).Spec.Containers[0].Env; len(env) != 0 {
		t.Errorf("no token secret, yet env %+v", env)
	}
	sec := TokenSecret(po, "abc")
	if sec.Name != po.TokenSecret || string(sec.Data[TokenKey]) != "abc" || sec.Labels[LabelRun] != po.RunID {
		t.Errorf("secret %+v", sec)
	}
}
