package k8s

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cnibench/cnibench/pkg/engine"
	"github.com/cnibench/cnibench/pkg/limits"
	"github.com/cnibench/cnibench/pkg/runid"
)

// Labels and defaults shared by every object cnibench creates.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "cnibench"
	LabelRun       = "cnibench.io/run"
	LabelScenario  = "cnibench.io/scenario"
	LabelRole      = "cnibench.io/role"

	// DefaultNamespace holds every object of every run unless told otherwise.
	DefaultNamespace = "cnibench"
	// DefaultPort is the engine's port; TCP and UDP share the number, so one
	// Service port name per protocol covers every test.
	DefaultPort = limits.DefaultPort

	// ManagedSelector selects everything cnibench created, in any run.
	ManagedSelector = LabelManagedBy + "=" + ManagedBy

	containerName = "cnibench"
	// nobody: the engine needs no privilege, so it does not get root.
	nonRootUID = 65534
)

// RunSelector selects the objects of one run.
func RunSelector(id string) string { return ManagedSelector + "," + LabelRun + "=" + id }

// PodOptions are the settings every pod of a run shares.
type PodOptions struct {
	RunID      string
	Namespace  string
	Image      string
	PullPolicy corev1.PullPolicy
	Port       int
	// TokenSecret names the run's Secret holding the engine token (key
	// TokenKey); server and client pods read it as CNIBENCH_TOKEN. Empty
	// means no token.
	TokenSecret string
	// TolerateTaints gives the engine pods a toleration for every taint.
	TolerateTaints bool
}

// TokenKey is the key of the token in the run's Secret.
const TokenKey = "token"

// TokenSecretName names the run's token Secret.
func TokenSecretName(runID string) string { return runid.Name(runID, "token") }

// TokenSecret is the run's Secret: a fresh random token, so only this run's
// clients can drive this run's servers, even a server on the host network.
func TokenSecret(o PodOptions, token string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: o.TokenSecret, Namespace: o.Namespace, Labels: o.labels("", "token")},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{TokenKey: []byte(token)},
	}
}

func (o PodOptions) labels(scenario, role string) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedBy, LabelRun: o.RunID, LabelRole: role}
	if scenario != "" {
		l[LabelScenario] = scenario
	}
	return l
}

func (o PodOptions) port() int {
	if o.Port == 0 {
		return DefaultPort
	}
	return o.Port
}

// NamespaceSpec is the run's namespace, labelled so clean can find it.
func NamespaceSpec(name, runID string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{LabelManagedBy: ManagedBy, LabelRun: runID},
	}}
}

// ServerName, ClientName and ServiceName name a scenario's objects
// cnb-<run>-<scenario>-…, the scheme every cnibench object follows.
func ServerName(runID, scenario string) string { return runid.Name(runID, scenario+"-srv") }

// ClientName names the client pod of one repeat (1-based).
func ClientName(runID, scenario string, repeat int) string {
	return runid.Name(runID, scenario+"-cli-"+strconv.Itoa(repeat))
}

// ServiceName names the Service of the service scenario.
func ServiceName(runID string) string { return runid.Name(runID, "svc") }

// pinTo is a required node affinity on the node's name. It is what the
// DaemonSet controller uses too: unlike spec.nodeName it goes through the
// scheduler, so a node that cannot take the pod shows up as an
// "unschedulable" event instead of a kubelet rejection.
func pinTo(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}},
			}},
		},
	}}
}

// engineSecurity gives the engine nothing: it binds a port above 1024,
// opens sockets and reads /proc, none of which needs a capability.
func engineSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		RunAsUser:                ptr(int64(nonRootUID)),
		RunAsGroup:               ptr(int64(nonRootUID)),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func ptr[T any](v T) *T { return &v }

func (o PodOptions) basePod(name, scenario, role string, p Placement, node string) *corev1.Pod {
	pod := o.basePodSpec(name, scenario, role, p, node)
	if o.TolerateTaints {
		pod.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	return pod
}

func (o PodOptions) basePodSpec(name, scenario, role string, p Placement, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: o.labels(scenario, role)},
		Spec: corev1.PodSpec{
			Affinity:    pinTo(node),
			HostNetwork: p.HostNetwork,
			// The engine never talks to the API server.
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(2)),
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           o.Image,
				ImagePullPolicy: o.PullPolicy,
				SecurityContext: engineSecurity(),
				Env:             o.tokenEnv(),
			}},
		},
	}
}

func (o PodOptions) tokenEnv() []corev1.EnvVar {
	if o.TokenSecret == "" {
		return nil
	}
	return []corev1.EnvVar{{Name: engine.TokenEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: o.TokenSecret}, Key: TokenKey}}}}
}

// ServerPod is the scenario's `cnibench server`, pinned to p.ServerNode. It
// is Ready once its TCP port accepts connections.
func ServerPod(o PodOptions, p Placement) *corev1.Pod {
	side := p
	side.HostNetwork = p.serverHostNetwork()
	pod := o.basePod(ServerName(o.RunID, p.Scenario), p.Scenario, "server", side, p.ServerNode)
	c := &pod.Spec.Containers[0]
	c.Args = []string{"server", "--listen", fmt.Sprintf(":%d", o.port())}
	c.Ports = []corev1.ContainerPort{
		{Name: "tcp", ContainerPort: int32(o.port()), Protocol: corev1.ProtocolTCP},
		{Name: "udp", ContainerPort: int32(o.port()), Protocol: corev1.ProtocolUDP},
	}
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(o.port()))}},
		PeriodSeconds:    1,
		FailureThreshold: 3,
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	return pod
}

// ClientPod is one repeat of the scenario's `cnibench client`, pinned to
// p.ClientNode and aimed at target (a pod IP, the server node's IP for
// host-network, or the Service's ClusterIP). It runs once; its log is the
// result.Set JSON. deadline bounds its life, so a hung client cannot outlive
// the run by long even if cnibench itself is killed.
func ClientPod(o PodOptions, p Placement, repeat int, target string, args ClientArgs, deadline int64) *corev1.Pod {
	side := p
	side.HostNetwork = p.clientHostNetwork()
	pod := o.basePod(ClientName(o.RunID, p.Scenario, repeat), p.Scenario, "client", side, p.ClientNode)
	pod.Spec.Containers[0].Args = append([]string{"client", "--server", target, "--port", strconv.Itoa(o.port())}, args.Flags()...)
	if args.Engine != "" && args.Engine != EngineBuiltin {
		pod.Name = ClientName(o.RunID, p.Scenario+"-"+args.Engine, repeat)
		toolPod(pod, args.Engine)
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.ActiveDeadlineSeconds = ptr(deadline)
	if args.Profile {
		pod.Spec.Containers[0].SecurityContext = profileSecurity()
		// Samples carry pids; in its own PID namespace the client would see
		// every other process — the server pod on the same node included —
		// as pid 0 and could not tell the measurement from the rest.
		pod.Spec.HostPID = true
	}
	return pod
}

// ServiceSpec is the ClusterIP Service in front of the service scenario's
// server, one port per protocol on the same number.
func ServiceSpec(o PodOptions) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName(o.RunID), Namespace: o.Namespace, Labels: o.labels(ScenarioService, "service")},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: o.labels(ScenarioService, "server"),
			Ports: []corev1.ServicePort{
				{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: int32(o.port()), TargetPort: intstr.FromInt32(int32(o.port()))},
				{Name: "udp", Protocol: corev1.ProtocolUDP, Port: int32(o.port()), TargetPort: intstr.FromInt32(int32(o.port()))},
			},
		},
	}
}

// ClientArgs are the measurement flags handed to `cnibench client`.
type ClientArgs struct {
	Tests    []string
	MsgSizes string // as the user wrote it, e.g. "1,1K,4K"; the engine parses it
	Duration string // Go duration, e.g. "5s"
	Warmup   string
	Parallel int
	// Engine selects a driver other than the built-in one ("" = builtin).
	Engine string
	// Profile samples every CPU of the client's node during each measured
	// window (--profile); the client pod then gets the capabilities that
	// needs (see profileSecurity), and only then.
	Profile bool
	// PathMTU probes the path to the server before the tests (client
	// --path-mtu: its MTU and TCP's MSS, in every result); the built-in
	// engine's server answers the probes, the tools' do not.
	PathMTU bool
}

// Flags renders the arguments, always ending in --log-stdout --json.
func (a ClientArgs) Flags() []string {
	var f []string
	if len(a.Tests) > 0 {
		f = append(f, "--test", strings.Join(a.Tests, ","))
	}
	if a.MsgSizes != "" {
		f = append(f, "--msg-size", a.MsgSizes)
	}
	if a.Duration != "" {
		f = append(f, "--duration", a.Duration)
	}
	if a.Warmup != "" {
		f = append(f, "--warmup", a.Warmup)
	}
	if a.Parallel > 1 {
		f = append(f, "--parallel", strconv.Itoa(a.Parallel))
	}
	if a.Engine != "" {
		f = append(f, "--engine", a.Engine)
	}
	if a.Profile {
		f = append(f, "--profile")
	}
	if a.PathMTU {
		f = append(f, "--path-mtu")
	}
	// Progress on stdout, ahead of the document: containerd copies stdout
	// and stderr on separate pipes, and a progress line racing the JSON
	// can land inside it in the pod's log (seen with --profile: "no result
	// JSON in the client's log"). ParseClientLog skips lines before it.
	return append(f, "--log-stdout", "--json")
}

// Audit DaemonSet layout: the host's /proc and /sys appear read-only under
// auditRoot, and `tune audit --root` reads them there.
const (
	auditRoot      = "/host"
	auditContainer = "audit"
)

// AuditDaemonSet runs `cnibench tune audit --json` once on every node.
//
// The audit runs in an init container, whose log holds the JSON; the main
// container is `cnibench k8s pause`, which only waits, so the pod stays
// Running (a DaemonSet cannot have restartPolicy Never) and Ready tells us
// the audit finished. The pods use the host network because net.* sysctls
// are per network namespace: reading them from the pod's own namespace
// would audit the pod, not the node. Beyond that they get read-only
// hostPath mounts and no capabilities; they run as root only so that
// root-only-readable files under /sys can be read, which needs no
// capability. They tolerate every taint, because "every node" includes
// control-plane nodes.
func AuditDaemonSet(o PodOptions, auditArgs []string) *appsv1.DaemonSet {
	labels := o.labels("", "audit")
	ro := func(name, path string) (corev1.Volume, corev1.VolumeMount) {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: path, Type: ptr(corev1.HostPathDirectory)}}},
			corev1.VolumeMount{Name: name, MountPath: auditRoot + path, ReadOnly: true}
	}
	procV, procM := ro("proc", "/proc")
	sysV, sysM := ro("sys", "/sys")
	sec := &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsUser:                ptr(int64(0)),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	args := append([]string{"tune", "audit", "--json", "--root", auditRoot}, auditArgs...)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: runid.Name(o.RunID, "audit"), Namespace: o.Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork:                   true,
					AutomountServiceAccountToken:  ptr(false),
					EnableServiceLinks:            ptr(false),
					TerminationGracePeriodSeconds: ptr(int64(1)),
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Volumes:                       []corev1.Volume{procV, sysV},
					InitContainers: []corev1.Container{{
						Name: auditContainer, Image: o.Image, ImagePullPolicy: o.PullPolicy,
						Args: args, VolumeMounts: []corev1.VolumeMount{procM, sysM}, SecurityContext: sec,
					}},
					Containers: []corev1.Container{{
						Name: containerName, Image: o.Image, ImagePullPolicy: o.PullPolicy,
						Args: []string{"k8s", "pause"}, SecurityContext: engineSecurity(),
					}},
				},
			},
		},
	}
}
