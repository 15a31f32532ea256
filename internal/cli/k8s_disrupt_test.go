package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestK8sDisruptRejectsBadInputBeforeTouchingTheCluster(t *testing.T) {
	unreachableCluster(t)
	notResult := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(notResult, []byte(`{"schema":"cnibench.result/v1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	wantUsageErrors(t, []usageCase{
		{[]string{"k8s", "disrupt", "--image", "x:1", "--events", "service-churn,reboot"}, `"reboot" is not an event`},
		{[]string{"k8s", "disrupt", "--image", "x:1", "--services", "0"}, "give --services 1 or more"},
		{[]string{"k8s", "disrupt", "--image", "x:1", "--services", "5", "--probes", "udp-rr=0"}, "probe rate 0/s"},
		{[]string{"k8s", "disrupt", "--image", "x:1", "--services", "5", "--target", "node"}, `--target "node": want pod or service`},
		{[]string{"k8s", "disrupt", "--image", "x:1", "--events", "agent-restart", "--agent", "calico"}, `--agent "calico"`},
		{[]string{"k8s", "disrupt", "--image", "x:1", "--services", "5", "--against", notResult}, "is not a disruption result"},
		{[]string{"k8s", "disrupt", "--image", "x:1", "--services", "5", "--image-pull-policy", "Sometimes"}, "--image-pull-policy"},
		{[]string{"k8s", "disrupt-agent", "--probe", "udp-rr", "--target", "10.0.0.1"}, "want IPv4:PORT"},
		{[]string{"k8s", "disrupt-agent", "--probe", "udp-rr", "--target", "10.0.0.1:7420"}, "want one probe and a positive duration"},
	})
}
