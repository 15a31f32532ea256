package k8s

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Conn is a connection to one cluster, resolved the way kubectl resolves it.
type Conn struct {
	Client kubernetes.Interface
	// Bulk is Client without the client-side request rate limit, for the
	// thousands of creates and deletes of --services.
	Bulk    kubernetes.Interface
	Config  *rest.Config
	Context string // kubeconfig context used ("" when in-cluster)
	Server  string // API server URL
}

// Connect resolves the kubeconfig exactly as kubectl does: an explicit
// --kubeconfig path, else the KUBECONFIG list, else ~/.kube/config, else the
// in-cluster service account; context "" means the file's current-context.
func Connect(kubeconfig, context string) (*Conn, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, fmt.Errorf("no Kubernetes cluster configured: pass --kubeconfig, set KUBECONFIG or create ~/.kube/config")
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	raw, err := cc.RawConfig()
	name := context
	if err == nil && name == "" {
		name = raw.CurrentContext
	}
	cfg.UserAgent = "cnibench"
	// Client pods are polled and logs fetched at a steady pace; the default
	// 5 QPS would throttle cleanup of a many-repeat run.
	cfg.QPS, cfg.Burst = 20, 40
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	bcfg := rest.CopyConfig(cfg)
	bcfg.QPS = -1 // no client-side limiter; the server's flow control still applies
	bulk, err := kubernetes.NewForConfig(bcfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Conn{Client: cs, Bulk: bulk, Config: cfg, Context: name, Server: cfg.Host}, nil
}
