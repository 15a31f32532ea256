package k8s

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cnibench/cnibench/pkg/image"
)

func TestParseEngines(t *testing.T) {
	lat := []string{"tcp_lat", "udp_lat"}
	got, err := ParseEngines("", lat, []int{1}, 5*time.Second, time.Second, 1)
	if err != nil || len(got) != 1 || got[0].Name != EngineBuiltin || got[0].IsTool() || !slices.Equal(got[0].Tests, lat) {
		t.Fatalf("default: %+v %v", got, err)
	}
	got, err = ParseEngines("qperf", lat, []int{1, 1024, 4096}, 5*time.Second, time.Second, 1)
	if err != nil || len(got) != 1 || !got[0].IsTool() || !NeedsTools(got) {
		t.Fatalf("qperf at 1,1K,4K: %+v %v", got, err)
	}
	// A cross-check: each tool measures the tests it has.
	got, err = ParseEngines("builtin, sockperf,iperf3,builtin", []string{"tcp_lat", "tcp_bw"}, []int{64}, 2*time.Second, 0, 1)
	if err != nil || len(got) != 3 {
		t.Fatalf("cross-check: %+v %v", got, err)
	}
	if !slices.Equal(got[0].Tests, []string{"tcp_lat", "tcp_bw"}) || !slices.Equal(got[1].Tests, []string{"tcp_lat"}) || !slices.Equal(got[2].Tests, []string{"tcp_bw"}) {
		t.Errorf("tests per engine: %+v", got)
	}
	for _, c := range []struct {
		list  string
		tests []string
		sizes []int
		dur   time.Duration
		want  string
	}{
		{"netperf", lat, []int{1}, time.Second, "unknown engine"},
		{"qperf", []string{"tcp_crr"}, []int{1}, time.Second, "qperf has no tcp_crr"},
		// The lab driver's own limits, checked before anything is created.
		{"sockperf", lat, []int{1}, time.Second, "sockperf's smallest message is 14 bytes"},
		{"qperf", lat, []int{1}, 1500 * time.Millisecond, "whole seconds"},
		{"builtin,iperf3", lat, []int{64}, time.Second, "--engine iperf3 measures none of --test tcp_lat,udp_lat"},
		{"builtin,sockperf", []string{"tcp_lat"}, []int{1}, time.Second, "--engine sockperf, tcp_lat at 1 bytes"},
	} {
		_, err := ParseEngines(c.list, c.tests, c.sizes, c.dur, 0, 1)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v %v: got %v, want an ErrInvalid with %q", c.list, c.tests, c.sizes, err, c.want)
		}
	}
	// RunFlags reach it.
	f := RunFlags{Scenarios: "pod-cross-node", Tests: "tcp_lat", MsgSizes: "1", Duration: time.Second, Parallel: 1, Repeats: 1, Engine: "qperf"}
	if o, _, err := f.Options(); err != nil || !NeedsTools(o.Engines) {
		t.Errorf("RunFlags --engine qperf: %+v %v", o.Engines, err)
	}
	f.Engine = "sockperf"
	if _, _, err := f.Options(); err == nil {
		t.Error("RunFlags --engine sockperf at 1 byte accepted")
	}
}

func TestEngineSkips(t *testing.T) {
	engines := []EngineRun{{Name: "qperf"}, {Name: "sockperf"}, {Name: EngineBuiltin}}
	for _, c := range []struct {
		p    Placement
		want []bool // skipped, per engine
	}{
		{Placement{Scenario: ScenarioCrossNode}, []bool{false, false, false}},
		// qperf cannot go through a Service; the first that can takes it.
		{Placement{Scenario: ScenarioService, ViaService: true}, []bool{true, false, true}},
		{Placement{Scenario: ScenarioHairpin, ViaService: true, Hairpin: true}, []bool{true, true, false}},
	} {
		for i, want := range c.want {
			if got := engineSkip(c.p, engines, i) != ""; got != want {
				t.Errorf("%s with %s: skipped %v, want %v (%q)", c.p.Scenario, engines[i].Name, got, want, engineSkip(c.p, engines, i))
			}
		}
	}
}

func TestDefaultToolsImage(t *testing.T) {
	if got := DefaultToolsImage("localhost/cnibench:v1-abc"); got != "localhost/cnibench:v1-abc"+image.ToolsTagSuffix {
		t.Errorf("%s", got)
	}
}

func TestToolServerPodSpec(t *testing.T) {
	p := Placement{Scenario: ScenarioCrossNode, ClientNode: "n1", ServerNode: "n2"}
	po := testPO
	po.TokenSecret = TokenSecretName(po.RunID)
	pod := ToolServerPod(po, p, "qperf")
	c := pod.Spec.Containers[0]
	if pod.Name != "cnb-ab12-pod-cross-node-qperf-srv" || pinnedNode(pod) != "n2" {
		t.Errorf("name %s on %s", pod.Name, pinnedNode(pod))
	}
	if pod.Labels[LabelEngine] != "qperf" || pod.Labels[LabelRole] != "server" || pod.Labels[LabelRun] != "ab12" {
		t.Errorf("labels %v", pod.Labels)
	}
	if want := []string{"k8s", "tool-server", "--engine", "qperf", "--port", "19765"}; !slices.Equal(c.Args, want) {
		t.Errorf("args %v, want %v", c.Args, want)
	}
	if len(c.Ports) != 2 || c.Ports[0].ContainerPort != 19765 || c.Ports[1].ContainerPort != 19765 {
		t.Errorf("ports %+v, want qperf's 19765 for tcp and udp", c.Ports)
	}
	// No probe connection may reach the tool: only a startup probe reading
	// /proc/net, and nothing once the pod is up.
	if c.ReadinessProbe != nil || c.LivenessProbe != nil {
		t.Errorf("readiness %+v liveness %+v: want none", c.ReadinessProbe, c.LivenessProbe)
	}
	if sp := c.StartupProbe; sp == nil || sp.Exec == nil ||
		!slices.Equal(sp.Exec.Command, []string{image.BinaryPath, "k8s", "tool-server", "--engine", "qperf", "--port", "19765", "--check"}) {
		t.Errorf("startup probe %+v", c.StartupProbe)
	}
	if len(c.Env) != 0 {
		t.Errorf("a tool server reads no token: env %+v", c.Env)
	}
	checkEngineSecurity(t, pod.Name, c)
	if c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("root file system not read-only")
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tmp" || len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].EmptyDir == nil {
		t.Errorf("want a writable emptyDir /tmp (iperf3's stream buffers): %+v %+v", c.VolumeMounts, pod.Spec.Volumes)
	}
	// sockperf and iperf3 use their own ports.
	if got := ToolServerPod(po, p, "sockperf").Spec.Containers[0].Ports[0].ContainerPort; got != 11111 {
		t.Errorf("sockperf port %d", got)
	}
	if got := ToolServerPod(po, p, "iperf3").Spec.Containers[0].Ports[0].ContainerPort; got != 5201 {
		t.Errorf("iperf3 port %d", got)
	}
	// The built-in server is untouched.
	if b := ServerPod(po, p); b.Labels[LabelEngine] != "" || b.Spec.Containers[0].ReadinessProbe == nil || len(b.Spec.Volumes) != 0 {
		t.Errorf("builtin server changed: %+v", b)
	}
}

func TestToolClientPodSpec(t *testing.T) {
	p := Placement{Scenario: ScenarioCrossNode, ClientNode: "n1", ServerNode: "n2"}
	args := ClientArgs{Tests: []string{"tcp_lat"}, MsgSizes: "1", Duration: "5s", Warmup: "1s", Engine: "qperf"}
	pod := ClientPod(testPO.forEngine("qperf"), p, 2, "10.244.1.5", args, 60)
	c := pod.Spec.Containers[0]
	if pod.Name != "cnb-ab12-pod-cross-node-qperf-cli-2" || pinnedNode(pod) != "n1" || pod.Labels[LabelEngine] != "qperf" {
		t.Errorf("pod %s on %s labels %v", pod.Name, pinnedNode(pod), pod.Labels)
	}
	if argAfter(c.Args, "--engine") != "qperf" || argAfter(c.Args, "--port") != "19765" || argAfter(c.Args, "--server") != "10.244.1.5" {
		t.Errorf("args %v", c.Args)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tmp" {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}
	checkEngineSecurity(t, pod.Name, c)
}

func TestExecuteToolEngine(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	o := testOptions()
	o.Engines = []EngineRun{{Name: "qperf", Tests: []string{"tcp_lat", "udp_lat"}}}
	ctx := context.Background()
	r, plan := fc.prepare(t, o)
	for _, p := range plan.Placements {
		if (p.Skip != "") != (p.Scenario == ScenarioService) {
			t.Errorf("%s: skip %q", p.Scenario, p.Skip)
		}
		if p.Scenario == ScenarioService && !strings.Contains(p.Skip, "data connection") {
			t.Errorf("service skip reason %q", p.Skip)
		}
	}
	var samples []Sample
	if err := r.Execute(ctx, plan, o, func(s Sample) error { samples = append(samples, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(samples) != 6 {
		t.Fatalf("%d samples, want 3 scenarios × 2 repeats", len(samples))
	}
	for _, s := range samples {
		if s.Error != "" || s.Engine != "qperf" || s.Arm != s.Scenario || !strings.Contains(s.Pod, "-qperf-cli-") {
			t.Errorf("sample %+v", s)
		}
	}
	for _, p := range fc.createdPods() {
		switch p.Labels[LabelRole] {
		case "server":
			if p.Labels[LabelEngine] != "qperf" || p.Spec.Containers[0].Args[1] != "tool-server" {
				t.Errorf("server %s: %v", p.Name, p.Spec.Containers[0].Args)
			}
		case "client":
			if argAfter(p.Spec.Containers[0].Args, "--engine") != "qperf" {
				t.Errorf("client %s: %v", p.Name, p.Spec.Containers[0].Args)
			}
		}
	}
	fc.wantClean(t)
}

// TestExecuteCrossCheck: one run, two engines, interleaved; the Service
// scenario only with the first engine (its one Service fronts one server).
func TestExecuteCrossCheck(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	o := testOptions()
	o.Scenarios = []string{ScenarioCrossNode, ScenarioService}
	o.Client.Tests = []string{"tcp_lat", "tcp_bw"}
	o.Engines = []EngineRun{{Name: EngineBuiltin, Tests: []string{"tcp_lat", "tcp_bw"}}, {Name: "sockperf", Tests: []string{"tcp_lat"}}}
	ctx := context.Background()
	r, plan := fc.prepare(t, o)
	if len(plan.Steps) != 6 || plan.EngineSkips["service/sockperf"] == "" {
		t.Fatalf("steps %+v skips %v", plan.Steps, plan.EngineSkips)
	}
	sink := &memSink{}
	rec, err := r.Record(ctx, plan, o, []int{64}, sink, "v", "")
	if err != nil {
		t.Fatal(err)
	}
	// Each repeat measures every (scenario, engine) pair once.
	for rep := 1; rep <= 2; rep++ {
		var arms []string
		for _, s := range rec.Samples {
			if s.Repeat == rep {
				arms = append(arms, s.Arm)
			}
		}
		slices.Sort(arms)
		if want := []string{"pod-cross-node", "pod-cross-node/sockperf", "service"}; !slices.Equal(arms, want) {
			t.Errorf("repeat %d measured %v, want %v", rep, arms, want)
		}
	}
	for _, s := range rec.Samples {
		if s.Engine == "sockperf" && len(s.Results) != 1 {
			t.Errorf("sockperf measured %d tests, want tcp_lat only", len(s.Results))
		}
	}
	var arms []string
	for _, a := range sink.run.Arms {
		arms = append(arms, a.Name+"="+a.Engine)
	}
	if want := []string{"pod-cross-node=builtin", "pod-cross-node/sockperf=sockperf", "service=builtin"}; !slices.Equal(arms, want) {
		t.Errorf("stored arms %v, want %v", arms, want)
	}
	if sink.run.Labels["k8s.engines"] != "builtin,sockperf" || sink.run.Labels["skipped.service/sockperf"] == "" {
		t.Errorf("labels %v", sink.run.Labels)
	}
	engines := map[string]int{}
	for _, s := range sink.samples {
		engines[s.Arm+"="+s.Engine]++
	}
	if engines["pod-cross-node/sockperf=sockperf"] != 2 || engines["pod-cross-node=builtin"] != 4 || engines["service=builtin"] != 4 {
		t.Errorf("stored samples by arm: %v", engines)
	}
	// Servers: builtin and sockperf across nodes, builtin only behind the Service.
	var servers []string
	for _, p := range fc.createdPods() {
		if p.Labels[LabelRole] == "server" {
			servers = append(servers, p.Name)
		}
	}
	slices.Sort(servers)
	if want := []string{"cnb-t3st-pod-cross-node-sockperf-srv", "cnb-t3st-pod-cross-node-srv", "cnb-t3st-service-srv"}; !slices.Equal(servers, want) {
		t.Errorf("servers %v, want %v", servers, want)
	}
	fc.wantClean(t)

	// One scenario: the arms are ratios to the first engine's.
	o.Scenarios = []string{ScenarioCrossNode}
	_, plan = fc.prepare(t, o)
	if run := StoreRun(plan, o, "v", ""); run.Baseline != ScenarioCrossNode || len(run.Arms) != 2 {
		t.Errorf("baseline %q arms %+v", run.Baseline, run.Arms)
	}
}

// TestExecuteImageWithoutTools: a plain image has no qperf; the tool server
// says so and exits, and the run stops with one line naming the fix.
func TestExecuteImageWithoutTools(t *testing.T) {
	fc := newFakeCluster(t, "n1", "n2")
	fc.serverState = func(p *corev1.Pod) {
		if p.Labels[LabelEngine] == "" {
			return
		}
		p.Status.Conditions = nil
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	}
	fc.logs = func(p *corev1.Pod, _ string) ([]byte, error) {
		if p.Labels[LabelRole] == "server" {
			return []byte("cnibench: qperf is not in this image (PATH=/): build the image with `cnibench image build --with-tools` on a host that has qperf, load it on every node and run again\n"), nil
		}
		return resultSet(p), nil
	}
	o := testOptions()
	o.Scenarios = []string{ScenarioCrossNode}
	o.Engines = []EngineRun{{Name: EngineBuiltin, Tests: []string{"tcp_lat"}}, {Name: "qperf", Tests: []string{"tcp_lat"}}}
	r, plan := fc.prepare(t, o)
	err := r.Execute(context.Background(), plan, o, nil)
	if err == nil || !strings.Contains(err.Error(), "cnibench image build --with-tools") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want one line naming image build --with-tools, got %v", err)
	}
	fc.wantClean(t)
}
