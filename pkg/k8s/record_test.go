package k8s

import (
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/storetest"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

func TestStoreRunAndSamples(t *testing.T) {
	plan := &Plan{RunID: "ab12", Namespace: "cnibench",
		Cluster: &Cluster{Context: "lab", Version: "v1.31.4", CNI: "cilium", Nodes: []NodeInfo{
			{Name: "n1", Kernel: "6.1", OSImage: "Debian 12", CPUs: 2}, {Name: "n2", Kernel: "6.6", OSImage: "Debian 12", CPUs: 2}}},
		Placements: []Placement{
			{Scenario: ScenarioSameNode, ClientNode: "n1", ServerNode: "n1"},
			{Scenario: ScenarioCrossNode, Skip: "needs two schedulable nodes"},
			{Scenario: ScenarioHost, ClientNode: "n1", ServerNode: "n2", HostNetwork: true},
		}}
	o := Options{Image: "img:1", Repeats: 2}
	run := StoreRun(plan, o, "v0", "# cnibench k8s run\n")
	if run.Kind != store.KindK8s || run.Name != "cnb-ab12-k8s" || run.Baseline != ScenarioHost {
		t.Errorf("run %+v", run)
	}
	if len(run.Arms) != 2 || run.Arms[0].Name != ScenarioSameNode || run.Arms[1].Topology != "k8s/host-network" || run.Arms[0].Engine != "builtin" {
		t.Errorf("arms %+v", run.Arms)
	}
	if run.Labels["skipped.pod-cross-node"] == "" || run.Labels["k8s.cni"] != "cilium" || run.Labels["nodes.host-network"] != "n1 -> n2" {
		t.Errorf("labels %v", run.Labels)
	}
	if run.Host.Kernel != "n1=6.1, n2=6.6" || run.Host.Distro != "Debian 12" || run.Host.Cores != 2 || run.Host.Hostname != "k8s:lab [cilium]" {
		t.Errorf("host %+v", run.Host)
	}

	db := storetest.Open(t)
	id, err := db.CreateRun(run)
	if err != nil {
		t.Fatal(err)
	}
	seq := 0
	ok := Sample{Step: Step{Placement: plan.Placements[0], Repeat: 1}, Results: []*result.Result{
		result.New(result.Tool{Name: "cnibench"}, "tcp_lat", 64), result.New(result.Tool{Name: "cnibench"}, "tcp_lat", 1024)}}
	bad := Sample{Step: Step{Placement: plan.Placements[2], Repeat: 1}, Error: "container exited 1"}
	var all []*store.Sample
	all = append(all, StoreSamples(id, ok, []string{"tcp_lat"}, []int{64, 1024}, "", &seq)...)
	all = append(all, StoreSamples(id, bad, []string{"tcp_lat"}, []int{64, 1024}, "", &seq)...)
	for _, s := range all {
		if err := db.AddSample(s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Samples(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("%d samples stored, want 4", len(got))
	}
	for i, s := range got {
		if s.Seq != i+1 {
			t.Errorf("sample %d has seq %d", i, s.Seq)
		}
		failed := s.Arm == ScenarioHost
		if failed != (s.Result == nil) || failed != strings.Contains(s.Error, "exited") {
			t.Errorf("sample %+v", s)
		}
	}
	if got[1].MsgSize != 1024 || got[3].MsgSize != 1024 || got[0].Arm != ScenarioSameNode {
		t.Errorf("sizes/arms: %+v", got)
	}
}
