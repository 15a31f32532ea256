package k8s

import (
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Options configure one `cnibench k8s run`.
type Options struct {
	Namespace  string
	Image      string
	PullPolicy corev1.PullPolicy
	Port       int

	Scenarios              []string
	ClientNode, ServerNode string
	// NodeSelector, a label selector ("" = every node), limits the nodes
	// the run may use.
	NodeSelector string
	// ClientSelector and ServerSelector choose the client's and the
	// server's node by label, as ClientNode and ServerNode do by name.
	ClientSelector, ServerSelector string
	// TolerateTaints lets the engine pods onto tainted nodes.
	TolerateTaints bool
	Client         ClientArgs
	// Engines measure every scenario, each with its tests (ParseEngines);
	// empty means builtin with Client.Tests.
	Engines []EngineRun
	Repeats int

	// ReadyTimeout bounds the wait for a server pod to become Ready and for
	// a client pod to start.
	ReadyTimeout time.Duration
	// MeasureTimeout bounds one client pod from start to exit.
	MeasureTimeout time.Duration
	// AgentCPU meters the datapath agents of the client's and server's
	// nodes in every measured window (see agents.go).
	AgentCPU bool
	// InspectDatapath runs the node probes as root with CAP_SYS_PTRACE,
	// CAP_SYS_ADMIN and CAP_NET_ADMIN: they then ask the CNI agent itself
	// (Cilium's version, host routing) and list the BPF programs attached
	// on the nodes.
	InspectDatapath bool
	// Services is how many filler Services (see FillerService) the
	// measured Service sits behind; 0 = none.
	Services int
	// SettleIdle, in percent (0 = off): before the first measurement, wait
	// until each client node's CPUs were this idle over SettleWindow (at
	// most SettleTimeout; see settle.go).
	SettleIdle float64
	// OnProbed, if set, is called once the run has probed its nodes and
	// completed plan.Cluster (kube-proxy mode, the running CNI), before
	// any measurement, so the caller can store the final fingerprint.
	OnProbed func(*Cluster) error
	// Keep leaves the run's objects in place, for debugging.
	Keep bool
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

func (o *Options) defaults() {
	podDefaults(&o.Namespace, &o.PullPolicy, &o.Log)
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.Repeats <= 0 {
		o.Repeats = 1
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.MeasureTimeout <= 0 {
		o.MeasureTimeout = 10 * time.Minute
	}
}

// podDefaults fills in what a run and an audit, which both start cnibench
// pods, default alike: the namespace, the image pull policy and the log.
func podDefaults(namespace *string, pull *corev1.PullPolicy, log *io.Writer) {
	if *namespace == "" {
		*namespace = DefaultNamespace
	}
	if *pull == "" {
		*pull = corev1.PullIfNotPresent
	}
	if *log == nil {
		*log = io.Discard
	}
}

func (o Options) podOptions(id string) PodOptions {
	return PodOptions{RunID: id, Namespace: o.Namespace, Image: o.Image, PullPolicy: o.PullPolicy, Port: o.Port,
		TokenSecret: TokenSecretName(id), TolerateTaints: o.TolerateTaints}
}
