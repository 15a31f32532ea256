package experiment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/result"
)

// hostVXLANVethArms is the arms list the tests here share: the HOST row
// (node to node on the VXLAN lab), the VXLAN pod path on the same lab, and
// a veth pair. It ends inside the veth arm so a test can give that arm
// more keys.
const hostVXLANVethArms = `
baseline: host
arms:
  - name: host
    topology: vxlan
    client: node1
    server: node2
  - name: vxlan
    topology: vxlan
  - name: veth
    topology: veth
`

const sample = `
name: t
tests: [tcp_lat, tcp_bw]
msg_sizes: [1, 4K]
duration: 200ms
warmup: 0s
repeats: 2` + hostVXLANVethArms + `    knobs: {mtu: "9000"}
    tests: [tcp_lat]
`

func TestParseDefaultsAndSizes(t *testing.T) {
	e := mustParse(t, sample)
	if e.MsgSizes[1] != 4096 || e.Order != "interleaved" || e.Engine != "builtin" || e.Arms[1].Client != "client" {
		t.Fatalf("defaults/sizes wrong: %+v", e)
	}
	if e.Arms[0].LabKey() != e.Arms[1].LabKey() {
		t.Error("arms on one topology without knobs should share a lab")
	}
	if e.Arms[2].LabKey() != "veth mtu=9000" {
		t.Errorf("LabKey = %q", e.Arms[2].LabKey())
	}
}

// test_sizes gives one test its own sizes; the others keep msg_sizes.
func TestTestSizesPlan(t *testing.T) {
	e := mustParse(t, "name: x\ntests: [tcp_lat, tcp_bw]\nmsg_sizes: [1, 1K]\ntest_sizes: {tcp_bw: [64K]}\nrepeats: 1\narms: [{name: a, topology: veth}]")
	var got []string
	for _, s := range e.Plan() {
		got = append(got, fmt.Sprintf("%s/%d", s.Test, s.MsgSize))
	}
	if want := "tcp_lat/1 tcp_lat/1024 tcp_bw/65536"; strings.Join(got, " ") != want {
		t.Errorf("plan %v, want %s", got, want)
	}
}

func TestParseErrorsNameFieldAndAllowed(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"name: x\ntests: [tcp_lat]\nrepeat: 3\narms: [{name: a, topology: veth}]", `x.yaml: line 3: unknown field "repeat" (allowed: name, description, source, tests, msg_sizes, test_sizes, duration`},
		{"name: x\ntests: [tcp_lat]\narms: [{name: a, topolgy: veth}]", `unknown field "topolgy" (allowed: name, description, topology, knobs`},
		{"name: x\ntests: [tcp_lag]\narms: [{name: a, topology: veth}]", `field tests: unknown test "tcp_lag" (allowed: tcp_lat, udp_lat, tcp_crr, tcp_bw, udp_bw)`},
		{"name: x\ntests: [tcp_lat]\nmsg_sizes: [1Q]\narms: [{name: a, topology: veth}]", `bad size "1Q"`},
		{"name: x\ntests: [tcp_lat]\nduration: 3 seconds\narms: [{name: a, topology: veth}]", `bad duration "3 seconds"`},
		{"name: x\ntests: [tcp_lat]\nbaseline: host\narms: [{name: a, topology: veth}]", `field baseline: "host" is not an arm (arms: a)`},
		{"name: x\ntests: [tcp_lat]\narms: [{name: a}]", `arm "a": set exactly one of topology`},
		{"name: x\ntests: [tcp_lat]\norder: random\narms: [{name: a, topology: veth}]", `field order: "random" (allowed: interleaved, sequential)`},
		{"name: x\n  bad: [", "x.yaml: yaml:"},
		{"name: x\ntests: [tcp_lat]\ntest_sizes: {tcp_bw: [64K]}\narms: [{name: a, topology: veth}]", `field test_sizes: "tcp_bw" is not one of the experiment's tests (tcp_lat)`},
		{"name: x\ntests: [tcp_lat, udp_bw]\ntest_sizes: {udp_bw: [64K]}\narms: [{name: a, topology: veth}]", "udp_bw at 65536 bytes: builtin udp_bw: message size 65536"},
		{"name: x\ntests: [tcp_bw, udp_bw]\nmsg_sizes: [64K]\narms: [{name: a, topology: veth}]", "udp_bw at 65536 bytes: builtin udp_bw: message size 65536: a UDP datagram carries at most 65507 bytes"},
	} {
		_, err := Parse([]byte(tc.doc), "x.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) error = %v; want it to contain %q", tc.doc, err, tc.want)
		}
	}
}

func TestPlanInterleavesAndRotates(t *testing.T) {
	e := mustParse(t, sample)
	var got []string
	for _, s := range e.Plan() {
		got = append(got, fmt.Sprintf("%d%s/%s/%d", s.Repeat, e.Arms[s.Arm].Name, s.Test, s.MsgSize))
	}
	want := []string{
		"0host/tcp_lat/1", "0vxlan/tcp_lat/1", "0veth/tcp_lat/1",
		"0host/tcp_lat/4096", "0vxlan/tcp_lat/4096", "0veth/tcp_lat/4096",
		"0host/tcp_bw/1", "0vxlan/tcp_bw/1", // veth runs tcp_lat only
		"0host/tcp_bw/4096", "0vxlan/tcp_bw/4096",
		// repeat 1 starts from the second arm
		"1vxlan/tcp_lat/1", "1veth/tcp_lat/1", "1host/tcp_lat/1",
		"1vxlan/tcp_lat/4096", "1veth/tcp_lat/4096", "1host/tcp_lat/4096",
		"1vxlan/tcp_bw/1", "1host/tcp_bw/1",
		"1vxlan/tcp_bw/4096", "1host/tcp_bw/4096",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("plan:\n got %v\nwant %v", got, want)
	}
	e.Order = "sequential"
	seq := e.Plan()
	if e.Arms[seq[0].Arm].Name != "host" || e.Arms[seq[1].Arm].Name != "host" || seq[1].Repeat != 1 {
		t.Fatalf("sequential order wrong: %+v", seq[:2])
	}
	for i, s := range seq {
		if s.Seq != i {
			t.Fatalf("Seq not consecutive at %d", i)
		}
	}
}

// fakes

type fakeLab struct {
	name    string
	mu      *sync.Mutex
	downs   *[]string
	downErr error
}

func (l *fakeLab) Name() string      { return l.name }
func (l *fakeLab) ChangesHost() bool { return strings.Contains(l.name, "rmem") }
func (l *fakeLab) Endpoint(n string) (string, string, error) {
	if n == "nope" {
		return "", "", errors.New("no endpoint nope")
	}
	return l.name + "/" + n, "10.0.0." + n, nil
}
func (l *fakeLab) Down(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err() // a cancelled context must not be used for teardown
	}
	l.mu.Lock()
	*l.downs = append(*l.downs, l.name)
	l.mu.Unlock()
	return l.downErr
}

type fakeLabs struct {
	mu       sync.Mutex
	ups      []string
	specs    []*lab.Spec // what each Up was given
	downs    []string
	fail     map[string]error
	downFail map[string]error // Down's error, by topology
}

func (f *fakeLabs) Up(_ context.Context, spec *lab.Spec) (LabInstance, error) {
	topo, knobs := spec.Source(), spec.Knobs()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[topo]; err != nil {
		return nil, err
	}
	name := topo
	if knobs["rmem_max"] != "" {
		name += "+rmem"
	}
	f.ups = append(f.ups, name)
	f.specs = append(f.specs, spec)
	return &fakeLab{name: name, mu: &f.mu, downs: &f.downs, downErr: f.downFail[topo]}, nil
}

type fakeMeasurer struct {
	n      int
	cancel func()
	stopAt int
	reqs   []MeasureRequest
}

func (m *fakeMeasurer) Measure(ctx context.Context, req MeasureRequest) (*result.Result, error) {
	m.n++
	m.reqs = append(m.reqs, req)
	if m.n == m.stopAt {
		m.cancel()
		return nil, ctx.Err()
	}
	r := result.New(result.Tool{Name: req.Engine}, req.Spec.Test, req.Spec.MsgSize)
	r.Latency = &result.Latency{OneWayNs: result.Dist{Count: 1, Mean: result.F(float64(m.n))}}
	return r, nil
}

type memSink struct {
	samples  []Sample
	complete bool
	status   string
	ended    bool
}

func (s *memSink) Begin(*Experiment) (int64, error) { return 7, nil }
func (s *memSink) Sample(id int64, x Sample) error {
	if id != 7 {
		return fmt.Errorf("run id %d", id)
	}
	s.samples = append(s.samples, x)
	return nil
}
func (s *memSink) End(_ int64, complete bool, status string) error {
	s.complete, s.status, s.ended = complete, status, true
	return nil
}

func TestExecuteSharesLabsStoresEverythingAndTearsDown(t *testing.T) {
	e := mustParse(t, sample)
	labs := &fakeLabs{}
	m := &fakeMeasurer{}
	sink := &memSink{}
	var out strings.Builder
	id, err := Execute(context.Background(), e, Options{Labs: labs, Measurer: m, Sink: sink, Progress: &out})
	if err != nil || id != 7 {
		t.Fatalf("Execute = %d, %v", id, err)
	}
	if strings.Join(labs.ups, ",") != "vxlan,veth" {
		t.Errorf("labs built: %v; want vxlan once (shared by two arms) and veth", labs.ups)
	}
	if len(labs.downs) != 2 {
		t.Errorf("labs torn down: %v", labs.downs)
	}
	if len(sink.samples) != len(e.Plan()) || !sink.complete || sink.status != "complete" {
		t.Fatalf("stored %d samples of %d, complete=%v %q", len(sink.samples), len(e.Plan()), sink.complete, sink.status)
	}
	// The host arm measures node1 -> node2 of the vxlan lab.
	r0 := m.reqs[0]
	if r0.ClientNetns != "vxlan/node1" || r0.ServerNetns != "vxlan/node2" || r0.Spec.Server != "10.0.0.node2" || !r0.StartServer {
		t.Errorf("first request: %+v", r0)
	}
	if !strings.Contains(out.String(), "[1/20] host tcp_lat 1B #1") {
		t.Errorf("progress output:\n%s", out.String())
	}
}

func TestExecuteLabFailureIsRecordedPerSample(t *testing.T) {
	e := mustParse(t, sample)
	labs := &fakeLabs{fail: map[string]error{"veth": errors.New("veth: not supported by this kernel")}}
	sink := &memSink{}
	_, err := Execute(context.Background(), e, Options{Labs: labs, Measurer: &fakeMeasurer{}, Sink: sink})
	var sf *StepsFailedError
	if !errors.As(err, &sf) || sf.Failed != 4 || sf.Total != 20 {
		t.Fatalf("err = %v, want 4 of 20 steps failed", err)
	}
	failed := 0
	for _, s := range sink.samples {
		if s.Arm.Name == "veth" {
			if s.Result != nil || !strings.Contains(s.Error, "not supported by this kernel") {
				t.Fatalf("veth sample: %+v", s)
			}
			failed++
		} else if s.Error != "" {
			t.Fatalf("other arm failed: %+v", s)
		}
	}
	if failed != 4 || !strings.Contains(sink.status, "4 of 20 steps failed") {
		t.Fatalf("failed=%d status=%q", failed, sink.status)
	}
}

// A lab that cannot be removed after every step was measured: the run is
// stored complete and the error is a TeardownError (which `cnibench run`
// reports after the table), naming the lab; the other labs still go down.
func TestExecuteTeardownFailureKeepsTheRun(t *testing.T) {
	e := mustParse(t, sample)
	labs := &fakeLabs{downFail: map[string]error{"veth": errors.New("remove /run/netns/x: device or resource busy")}}
	sink := &memSink{}
	_, err := Execute(context.Background(), e, Options{Labs: labs, Measurer: &fakeMeasurer{}, Sink: sink})
	var te *TeardownError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "lab veth: remove /run/netns/x") {
		t.Fatalf("err = %v, want a TeardownError naming lab veth", err)
	}
	if !sink.complete || len(sink.samples) != len(e.Plan()) {
		t.Errorf("run stored complete=%v with %d of %d samples", sink.complete, len(sink.samples), len(e.Plan()))
	}
	if len(labs.downs) != 2 {
		t.Errorf("labs torn down: %v, want both tried", labs.downs)
	}
}

func TestExecuteInterruptedStoresFinishedAndCleansUp(t *testing.T) {
	e := mustParse(t, sample)
	ctx, cancel := context.WithCancel(context.Background())
	labs := &fakeLabs{}
	m := &fakeMeasurer{cancel: cancel, stopAt: 5}
	sink := &memSink{}
	_, err := Execute(ctx, e, Options{Labs: labs, Measurer: m, Sink: sink})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if len(sink.samples) != 4 || sink.complete || !sink.ended || !strings.Contains(sink.status, "interrupted after 4 of 20") {
		t.Fatalf("samples=%d complete=%v status=%q", len(sink.samples), sink.complete, sink.status)
	}
	if len(labs.downs) != 2 {
		t.Fatalf("labs not torn down after interrupt: %v", labs.downs)
	}
}

// Check resolves each arm's lab once, into a typed spec, and the run builds
// exactly that spec — the knobs' text is not read again; an arm no Check
// saw is not built.
func TestExecuteBuildsTheSpecCheckResolved(t *testing.T) {
	e := mustParse(t, sample)
	veth := e.Arms[2].lab
	if veth == nil || veth.Topology != "veth" || veth.MTU != 9000 || e.Arms[0].lab == nil {
		t.Fatalf("arms' resolved specs: %+v", e.Arms)
	}
	labs := &fakeLabs{}
	if _, err := Execute(context.Background(), e, Options{Labs: labs, Measurer: &fakeMeasurer{}, Sink: &memSink{}}); err != nil {
		t.Fatal(err)
	}
	if len(labs.specs) != 2 || labs.specs[0] != e.Arms[0].lab || labs.specs[1] != veth {
		t.Errorf("built %v, want the arms' resolved specs", labs.specs)
	}
	e.Arms[2].lab = nil
	labs = &fakeLabs{}
	_, err := Execute(context.Background(), e, Options{Labs: labs, Measurer: &fakeMeasurer{}, Sink: &memSink{}})
	if err == nil || strings.Join(labs.ups, ",") != "vxlan" {
		t.Errorf("unchecked arm: err %v, built %v", err, labs.ups)
	}
}

// A lab that changes host settings must never be up while another arm is
// measured: it is built around each of its own steps only.
func TestExecuteHostChangingLabIsExclusive(t *testing.T) {
	e := mustParse(t, `
name: x
tests: [udp_bw]
repeats: 2
arms:
  - name: a
    topology: ovs-netdev
  - name: b
    topology: ovs-netdev
    knobs: {rmem_max: "1048576"}
`)
	labs := &fakeLabs{}
	sink := &memSink{}
	if _, err := Execute(context.Background(), e, Options{Labs: labs, Measurer: &fakeMeasurer{}, Sink: sink}); err != nil {
		t.Fatal(err)
	}
	// ups: a's lab, b's probe, then b around each of its 2 steps.
	if got := strings.Join(labs.ups, ","); got != "ovs-netdev,ovs-netdev+rmem,ovs-netdev+rmem,ovs-netdev+rmem" {
		t.Fatalf("ups = %s", got)
	}
	if got := strings.Join(labs.downs, ","); got != "ovs-netdev+rmem,ovs-netdev+rmem,ovs-netdev+rmem,ovs-netdev" {
		t.Fatalf("downs = %s (each exclusive build torn down right after its step)", got)
	}
	for _, s := range sink.samples {
		if s.Error != "" {
			t.Fatalf("sample failed: %+v", s)
		}
	}
}

// mustParse parses an experiment a test needs valid, failing the test
// when it is not.
func mustParse(t *testing.T, doc string) *Experiment {
	t.Helper()
	e, err := Parse([]byte(doc), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return e
}
