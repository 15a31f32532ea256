package k8s

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cnibench/cnibench/pkg/driver"
	// The engines --engine can name; each registers itself with the driver
	// registry, which ParseEngines checks against.
	_ "github.com/cnibench/cnibench/pkg/driver/builtin"
	_ "github.com/cnibench/cnibench/pkg/driver/iperf3"
	_ "github.com/cnibench/cnibench/pkg/driver/qperf"
	_ "github.com/cnibench/cnibench/pkg/driver/sockperf"
	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/image"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/units"
)

// EngineBuiltin is cnibench's own engine: `cnibench server` and `client`.
const EngineBuiltin = "builtin"

// LabelEngine marks the pods of a reference tool (qperf, iperf3,
// sockperf); the built-in engine's pods do not carry it.
const LabelEngine = "cnibench.io/engine"

// toolTmp is where a tool pod gets a writable directory: iperf3 backs each
// stream's buffer with a temporary file, and the root file system is
// read-only.
const toolTmp = "/tmp"

// EngineRun is one engine of a run and the tests it measures.
type EngineRun struct {
	Name  string   `json:"name"`
	Tests []string `json:"tests"`
}

// IsTool reports whether the engine is a reference tool run from the image.
func (e EngineRun) IsTool() bool { return e.Name != EngineBuiltin }

// ParseEngines checks --engine: a comma list of engines ("" = builtin),
// each registered, each able to run the given tests at every size as the
// lab would (driver.CheckSpec builds the real commands). With one engine,
// every test must be one it has; with several (a cross-check), a tool
// measures the tests it has, as the lab's crosscheck does, and must have
// at least one. Every error matches ErrInvalid.
func ParseEngines(list string, tests []string, sizes []int, duration, warmup time.Duration, parallel int) ([]EngineRun, error) {
	bad := func(format string, a ...any) error { return errkind.Errorf(ErrInvalid, format, a...) }
	names := units.SplitList(list)
	if len(names) == 0 {
		names = []string{EngineBuiltin}
	}
	var out []EngineRun
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		d, err := driver.Lookup(n)
		if err != nil {
			return nil, bad("--engine: %v", err)
		}
		e := EngineRun{Name: n}
		var lacks []string
		for _, t := range tests {
			if err := d.Supports(t); err != nil {
				if len(names) == 1 {
					return nil, bad("--engine %s: %v", n, err)
				}
				lacks = append(lacks, t)
				continue
			}
			for _, z := range sizes {
				spec := driver.Spec{Server: "192.0.2.1", Test: t, MsgSize: z, Duration: duration, Warmup: warmup, Parallel: parallel, Persistent: true}
				if err := driver.CheckSpec(d, spec, true); err != nil {
					return nil, bad("--engine %s, %s at %d bytes: %v", n, t, z, err)
				}
			}
			e.Tests = append(e.Tests, t)
		}
		if len(e.Tests) == 0 {
			return nil, bad("--engine %s measures none of --test %s", n, strings.Join(lacks, ","))
		}
		out = append(out, e)
	}
	return out, nil
}

// NeedsTools reports whether any engine is a reference tool, i.e. the run
// needs the image `cnibench image build --with-tools` writes.
func NeedsTools(engines []EngineRun) bool {
	for _, e := range engines {
		if e.IsTool() {
			return true
		}
	}
	return false
}

// DefaultToolsImage is the image name `image build --with-tools` gives the
// binary at ref's place: ref's tag with the tools suffix.
func DefaultToolsImage(ref string) string { return ref + image.ToolsTagSuffix }

// viaService reports whether an engine can be measured through a Service.
// qperf cannot: it opens each test's data connection on a port it picks at
// run time, which a ClusterIP Service does not forward.
func viaService(e EngineRun) bool { return e.Name != "qperf" }

// engineSkip says why a scenario is not measured with the engine at idx in
// engines ("" = it is). The service scenario has one Service, in front of
// one server: that of the first engine that can go through it.
func engineSkip(p Placement, engines []EngineRun, idx int) string {
	if p.Hairpin {
		// Each hairpin repeat has a Service of its own (hairpin.go).
		if engines[idx].IsTool() {
			return "the hairpin pod's server sidecar is the built-in engine's; tools are not run there"
		}
		return ""
	}
	if !p.ViaService {
		return ""
	}
	if !viaService(engines[idx]) {
		return "qperf opens each test's data connection on a port it picks at run time, which a ClusterIP Service does not forward"
	}
	for i := 0; i < idx; i++ {
		if viaService(engines[i]) {
			return "the run's one Service fronts the " + engines[i].Name + " server only"
		}
	}
	return ""
}

// ArmName is the stored arm of a scenario measured with the engine at idx
// in --engine: the scenario itself for the first engine (so a one-engine
// run's arms are the scenarios, as always), scenario/engine for the others.
func ArmName(scenario string, engines []EngineRun, idx int) string {
	if idx == 0 {
		return scenario
	}
	return scenario + "/" + engines[idx].Name
}

// planEngines spreads the plan over the engines: a placement no engine can
// measure is skipped with the reason, the other (scenario, engine) pairs
// left out are listed in plan.EngineSkips, and the steps visit every
// measured pair once per repeat, each repeat starting one pair later (as
// Interleave does for scenarios), so drift spreads over engines too.
func planEngines(pl []Placement, engines []EngineRun, repeats int) ([]Placement, map[string]string, []Step) {
	skips := map[string]string{}
	type pair struct {
		p   Placement
		idx int
	}
	var pairs []pair
	for i := range pl {
		if pl[i].Skip != "" {
			continue
		}
		var why []string
		n := 0
		for idx, e := range engines {
			if s := engineSkip(pl[i], engines, idx); s != "" {
				skips[pl[i].Scenario+"/"+e.Name] = s
				why = append(why, e.Name+": "+s)
				continue
			}
			pairs = append(pairs, pair{pl[i], idx})
			n++
		}
		if n == 0 {
			pl[i].Skip = strings.Join(why, "; ")
			for _, e := range engines {
				delete(skips, pl[i].Scenario+"/"+e.Name)
			}
		}
	}
	var steps []Step
	for r := 0; r < repeats; r++ {
		for i := range pairs {
			pr := pairs[(i+r)%len(pairs)]
			e := engines[pr.idx]
			st := Step{Placement: pr.p, Repeat: r + 1, Arm: ArmName(pr.p.Scenario, engines, pr.idx)}
			if e.IsTool() {
				st.Engine = e.Name
			}
			steps = append(steps, st)
		}
	}
	if len(skips) == 0 {
		skips = nil
	}
	return pl, skips, steps
}

// toolPort is the port a tool's pods use: the tool's own default, as in
// the lab.
func toolPort(name string) int {
	d, err := driver.Lookup(name)
	if err != nil {
		return DefaultPort
	}
	if dp, ok := d.(driver.DefaultPorter); ok {
		return dp.DefaultPort()
	}
	return DefaultPort
}

// forEngine is the pod options of the engine's pods: a tool's own port.
func (o PodOptions) forEngine(engine string) PodOptions {
	if engine != "" && engine != EngineBuiltin {
		o.Port = toolPort(engine)
	}
	return o
}

// ToolServerName names a tool's server pod of a scenario.
func ToolServerName(runID, scenario, engine string) string {
	return runid.Name(runID, scenario+"-"+engine+"-srv")
}

// toolPod adapts an engine pod to a tool: the engine label and a writable
// /tmp (memory-backed, the root stays read-only).
func toolPod(pod *corev1.Pod, engine string) {
	pod.Labels[LabelEngine] = engine
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "tmp",
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tmp", MountPath: toolTmp})
}

// ToolServerPod is the scenario's server for a reference tool: `cnibench
// k8s tool-server`, which runs the tool's own server commands (the lab
// driver's, persistent) on the tool's port. It is Ready once every one of
// them has bound its port, which a startup probe checks by reading the
// pod's /proc/net tables (`tool-server --check`): no probe connection ever
// reaches the tool, whose servers would take it for a client (iperf3
// answers a second client "busy"), and no probe runs during measurements.
// An image without the tool makes tool-server exit at once saying to
// build the image with `cnibench image build --with-tools`.
func ToolServerPod(o PodOptions, p Placement, engine string) *corev1.Pod {
	o = o.forEngine(engine)
	pod := ServerPod(o, p)
	pod.Name = ToolServerName(o.RunID, p.Scenario, engine)
	toolPod(pod, engine)
	c := &pod.Spec.Containers[0]
	args := []string{"k8s", "tool-server", "--engine", engine, "--port", strconv.Itoa(o.port())}
	c.Args = args
	// The tools do not read the run's token.
	c.Env = nil
	c.ReadinessProbe = nil
	c.StartupProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: append(append([]string{image.BinaryPath}, args...), "--check")}},
		PeriodSeconds:    1,
		FailureThreshold: 120,
	}
	return pod
}

// engines are the run's engines; with none given, the one named by
// Client.Engine (builtin when empty) with Client.Tests.
func (o Options) engines() []EngineRun {
	if len(o.Engines) > 0 {
		return o.Engines
	}
	name := o.Client.Engine
	if name == "" {
		name = EngineBuiltin
	}
	return []EngineRun{{Name: name, Tests: o.Client.Tests}}
}

// clientArgs are the client flags of a pod measuring with engine ("" =
// builtin): the run's, with that engine and its tests.
func (o Options) clientArgs(engine string) ClientArgs {
	a := o.Client
	a.Engine = engine
	name := engine
	if name == "" {
		name = EngineBuiltin
	}
	for _, e := range o.engines() {
		if e.Name == name {
			a.Tests = e.Tests
		}
	}
	// Only a cnibench server answers path MTU probes.
	a.PathMTU = a.PathMTU && name == EngineBuiltin
	return a
}

// engines are the plan's engines, or o's for a plan made without them.
func (plan *Plan) engines(o Options) []EngineRun {
	if len(plan.Engines) > 0 {
		return plan.Engines
	}
	return o.engines()
}

// serverEngines are the engines that need a server for the placement, as
// step engines ("" = builtin), in --engine order.
func (plan *Plan) serverEngines(p Placement) []string {
	engines := plan.Engines
	if len(engines) == 0 {
		engines = []EngineRun{{Name: EngineBuiltin}}
	}
	var out []string
	for _, e := range engines {
		if _, skipped := plan.EngineSkips[p.Scenario+"/"+e.Name]; skipped {
			continue
		}
		if e.IsTool() {
			out = append(out, e.Name)
		} else {
			out = append(out, "")
		}
	}
	return out
}

// serverPodFor is the placement's server for a step engine ("" = builtin).
func serverPodFor(o PodOptions, p Placement, engine string) *corev1.Pod {
	if engine == "" {
		return ServerPod(o, p)
	}
	return ToolServerPod(o, p, engine)
}

// targetKey keys a run's targets by scenario and step engine.
func targetKey(scenario, engine string) string { return scenario + "/" + engine }
