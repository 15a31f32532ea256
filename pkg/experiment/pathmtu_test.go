package experiment

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/result"
)

// probingLabs builds fakeLabs that probe their paths: the veth lab's probe
// fails, the others name the path they probed.
type probingLabs struct {
	fakeLabs
	probes []string
}

type probingLab struct {
	*fakeLab
	labs *probingLabs
}

func (f *probingLabs) Up(ctx context.Context, spec *lab.Spec) (LabInstance, error) {
	l, err := f.fakeLabs.Up(ctx, spec)
	if err != nil {
		return nil, err
	}
	return probingLab{l.(*fakeLab), f}, nil
}

func (l probingLab) ProbePath(_ context.Context, client, server string) (*result.PathMTU, error) {
	path := l.name + " " + client + "→" + server
	l.labs.probes = append(l.labs.probes, path)
	if l.name == "veth" {
		return nil, errors.New("responder: address in use")
	}
	mtu := 1450
	return &result.PathMTU{Target: path, Verdict: result.PathOK, MTU: &mtu}, nil
}

// Each arm's path is probed once when its lab comes up — once per lab and
// pair of endpoints, however many arms share it — and every sample of the arm
// carries it; a probe that fails leaves the reason in its place.
func TestExecuteProbesEachPathOnce(t *testing.T) {
	doc := sample + `  - name: vxlan-again
    topology: vxlan
    tests: [tcp_lat]
`
	e := mustParse(t, doc)
	labs := &probingLabs{}
	sink := &memSink{}
	var out strings.Builder
	if _, err := Execute(context.Background(), e, Options{Labs: labs, Measurer: &fakeMeasurer{}, Sink: sink, Progress: &out}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(labs.probes, ", "); got != "vxlan node1→node2, vxlan client→server, veth client→server" {
		t.Errorf("probed %s", got)
	}
	want := map[string]string{"host": "vxlan node1→node2", "vxlan": "vxlan client→server", "vxlan-again": "vxlan client→server"}
	for _, s := range sink.samples {
		p := s.Result.PathMTU
		switch {
		case p == nil:
			t.Fatalf("%s: no path", s.Arm.Name)
		case s.Arm.Name == "veth":
			if p.MTU != nil || p.Missing["mtu"] != "responder: address in use" {
				t.Errorf("veth: %+v, want the probe's error as the reason", p)
			}
		case p.Target != want[s.Arm.Name] || p.MTU == nil:
			t.Errorf("%s: path %+v, want %s", s.Arm.Name, p, want[s.Arm.Name])
		}
	}
	if !strings.Contains(out.String(), "arm vxlan: path client → server: 1450") || !strings.Contains(out.String(), "arm veth: path client → server: path MTU unknown: responder: address in use") {
		t.Errorf("progress:\n%s", out.String())
	}
}
