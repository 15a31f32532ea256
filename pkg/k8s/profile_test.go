package k8s

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// --profile gives the client pod CAP_PERFMON and CAP_SYSLOG as root and
// nothing else; without it (and always for the server) the pod is as
// locked down as before.
func TestProfileSecurityOnlyWithProfile(t *testing.T) {
	o := PodOptions{RunID: "t3st", Namespace: "ns", Image: "img"}
	p := Placement{Scenario: "pod-same-node", ClientNode: "n1", ServerNode: "n1"}
	plain := ClientPod(o, p, 1, "10.0.0.1", ClientArgs{Tests: []string{"tcp_lat"}}, 60)
	prof := ClientPod(o, p, 1, "10.0.0.1", ClientArgs{Tests: []string{"tcp_lat"}, Profile: true}, 60)
	if sc := plain.Spec.Containers[0].SecurityContext; len(sc.Capabilities.Add) != 0 || !*sc.RunAsNonRoot {
		t.Errorf("plain client: %+v", sc)
	}
	sc := prof.Spec.Containers[0].SecurityContext
	if !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"PERFMON", "SYSLOG"}) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		*sc.RunAsUser != 0 || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || sc.Privileged != nil {
		t.Errorf("profiled client: %+v", sc)
	}
	if !prof.Spec.HostPID || plain.Spec.HostPID {
		t.Errorf("hostPID: profiled %v, plain %v", prof.Spec.HostPID, plain.Spec.HostPID)
	}
	if !slices.Contains(prof.Spec.Containers[0].Args, "--profile") || slices.Contains(plain.Spec.Containers[0].Args, "--profile") {
		t.Errorf("args: %v / %v", prof.Spec.Containers[0].Args, plain.Spec.Containers[0].Args)
	}
	if sc := ServerPod(o, p).Spec.Containers[0].SecurityContext; len(sc.Capabilities.Add) != 0 {
		t.Errorf("server got capabilities: %+v", sc)
	}
}

// The window profiles a client pod prints come back with its sample and
// are paired with the stored samples by test and size.
func TestProfilesFromClientLog(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	fc.logs = func(pod *corev1.Pod, _ string) ([]byte, error) {
		b := resultSet(pod)
		var set result.Set
		if err := json.Unmarshal(b[len("cnibench client: warming up\n"):], &set); err != nil {
			return nil, err
		}
		for _, r := range set.Results {
			set.Profiles = append(set.Profiles, &result.WindowProfile{Test: r.Test, MsgSizeBytes: r.MsgSizeBytes,
				Event: "cpu-clock", FrequencyHz: 499, CPUs: 2, WindowNs: 1e9, Samples: 2, PeriodSum: 4e6,
				Folded: "cnibench;[user];do_syscall_64;tcp_sendmsg 2\n"})
		}
		return json.Marshal(set)
	}
	o := testOptions()
	o.Client.Profile = true
	ctx := context.Background()
	r, plan := fc.prepare(t, o)
	var all []*store.Profile
	seq := 0
	err := r.Execute(ctx, plan, o, func(s Sample) error {
		if len(s.Profiles) != len(s.Results) || len(s.Results) == 0 {
			t.Errorf("sample %s: %d profiles for %d results", s.Pod, len(s.Profiles), len(s.Results))
		}
		made := StoreSamples(7, s, o.Client.Tests, []int{1}, "", &seq)
		all = append(all, StoreProfiles(7, s, made)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 || all[0].RunID != 7 || all[0].Seq != 1 || all[0].Folded == "" {
		t.Fatalf("stored profiles: %+v", all)
	}
	clients := 0
	for _, p := range fc.createdPods() {
		if p.Labels[LabelRole] != "client" {
			continue
		}
		clients++
		if !slices.Contains(p.Spec.Containers[0].Args, "--profile") {
			t.Errorf("client pod %s without --profile", p.Name)
		}
	}
	if clients == 0 {
		t.Error("no client pod was created")
	}
}
