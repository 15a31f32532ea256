package k8s

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// The flags are checked before the cluster is contacted: the kubeconfig
// named here does not exist, so reaching Connect would be another error.
func TestCommandsCheckFlagsBeforeTheCluster(t *testing.T) {
	cf := ClusterFlags{Kubeconfig: filepath.Join(t.TempDir(), "none"), Namespace: DefaultNamespace, Image: "x:1", PullPolicy: "IfNotPresent"}
	good := RunFlags{Scenarios: "default", Tests: "tcp_lat", MsgSizes: "64", Duration: time.Second, Parallel: 1, Repeats: 1, Engine: "builtin"}
	badPolicy := cf
	badPolicy.PullPolicy = "Sometimes"
	for name, c := range map[string]RunCommand{
		"scenario":    {RunFlags: func() RunFlags { f := good; f.Scenarios = "nodeport"; return f }(), Cluster: cf},
		"size":        {RunFlags: func() RunFlags { f := good; f.Tests, f.MsgSizes = "udp_bw", "70000"; return f }(), Cluster: cf},
		"engine":      {RunFlags: func() RunFlags { f := good; f.Engine = "netperf"; return f }(), Cluster: cf},
		"pull policy": {RunFlags: good, Cluster: badPolicy},
	} {
		var out, log bytes.Buffer
		err := c.Run(context.Background(), &out, &log)
		if !errors.Is(err, ErrInvalid) || out.Len()+log.Len() > 0 {
			t.Errorf("%s: got %v, want a flag error before anything is printed", name, err)
		}
	}
	if _, err := (AuditCommand{Cluster: badPolicy}).Run(context.Background(), &bytes.Buffer{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("audit with a bad pull policy: %v", err)
	}
	// With good flags the next step is the cluster, which is not there.
	var out, log bytes.Buffer
	if err := (RunCommand{RunFlags: good, Cluster: cf}).Run(context.Background(), &out, &log); err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("good flags, no cluster: %v", err)
	}
}
