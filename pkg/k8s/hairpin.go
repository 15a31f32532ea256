package k8s

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cnibench/cnibench/pkg/runid"
)

// The hairpin scenario is kubernetes/perf-tests' "hairpin": a pod reaches
// a ClusterIP Service whose only endpoint is that same pod, so the packet
// leaves the pod, is DNATed back to the pod's own address and must come in
// again through the port it left by (the bridge's hairpin mode, or the
// CNI's equivalent). A client and a server in one pod give exactly that:
// each repeat is one pod whose server is a native sidecar (an init
// container that keeps running) and whose main container is the client,
// behind a Service of its own that selects only that pod. A second init
// container waits until the ClusterIP answers from inside the pod — the
// hairpin path itself — so the client never measures a half-programmed
// node. The Service publishes not-ready addresses because the pod is not
// Ready while its init containers run.

// LabelHairpin selects the one pod behind a hairpin Service.
const LabelHairpin = "cnibench.io/hairpin"

// Container names of the hairpin pod besides the client's.
const (
	hairpinServer = "server"
	hairpinWait   = "wait"
)

// HairpinServiceName names the Service of one hairpin repeat (1-based).
func HairpinServiceName(runID string, repeat int) string {
	return runid.Name(runID, ScenarioHairpin+"-svc-"+strconv.Itoa(repeat))
}

// HairpinService is the ClusterIP Service of one repeat: it selects only
// the repeat's pod, by name.
func HairpinService(o PodOptions, repeat int) *corev1.Service {
	pod := ClientName(o.RunID, ScenarioHairpin, repeat)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: HairpinServiceName(o.RunID, repeat), Namespace: o.Namespace,
			Labels: o.labels(ScenarioHairpin, "service")},
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			Selector:                 map[string]string{LabelRun: o.RunID, LabelHairpin: pod},
			PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{
				{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: int32(o.port()), TargetPort: intstr.FromInt32(int32(o.port()))},
				{Name: "udp", Protocol: corev1.ProtocolUDP, Port: int32(o.port()), TargetPort: intstr.FromInt32(int32(o.port()))},
			},
		},
	}
}

// HairpinPod is one hairpin repeat: the client pod of ClientPod aimed at
// the repeat's ClusterIP, with the server as a sidecar on the same port
// and a wait for the ClusterIP (at most wait) before the client starts.
func HairpinPod(o PodOptions, p Placement, repeat int, clusterIP string, args ClientArgs, deadline int64, wait time.Duration) *corev1.Pod {
	pod := ClientPod(o, p, repeat, clusterIP, args, deadline)
	pod.Labels[LabelHairpin] = pod.Name
	srv := ServerPod(o, p).Spec.Containers[0]
	srv.Name = hairpinServer
	srv.RestartPolicy = ptr(corev1.ContainerRestartPolicyAlways)
	// A sidecar's startup probe holds back the next init container until
	// the server listens; readiness does not matter here.
	srv.StartupProbe, srv.ReadinessProbe = srv.ReadinessProbe, nil
	srv.StartupProbe.FailureThreshold = 60
	w := corev1.Container{
		Name: hairpinWait, Image: o.Image, ImagePullPolicy: o.PullPolicy, SecurityContext: engineSecurity(),
		Args: []string{"k8s", "wait-tcp", net.JoinHostPort(clusterIP, strconv.Itoa(o.port())), "--timeout", wait.String()},
	}
	pod.Spec.InitContainers = []corev1.Container{srv, w}
	return pod
}

// hairpinTarget creates the repeat's Service and returns its ClusterIP and
// a function that deletes it.
func (r *Runner) hairpinTarget(ctx context.Context, po PodOptions, repeat int) (string, func(), error) {
	api := r.Client.CoreV1().Services(po.Namespace)
	svc, err := api.Create(ctx, HairpinService(po, repeat), metav1.CreateOptions{})
	if err != nil {
		return "", func() {}, APIError("create", "hairpin service", err)
	}
	del := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = api.Delete(dctx, svc.Name, metav1.DeleteOptions{})
	}
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone {
		del()
		return "", func() {}, fmt.Errorf("hairpin service %s got no ClusterIP", svc.Name)
	}
	return ip, del, nil
}
