package experiment

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/storetest"
	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/driver/builtin"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
)

// recordingLabs remembers the run ids of the labs it built, so the test can
// check that exactly those are gone afterwards (other packages' tests may
// build labs of their own at the same time).
type recordingLabs struct {
	Labs
	ids []string
}

func (r *recordingLabs) Up(ctx context.Context, spec *lab.Spec) (LabInstance, error) {
	l, err := r.Labs.Up(ctx, spec)
	if err == nil {
		r.ids = append(r.ids, l.(labInstance).l.ID)
	}
	return l, err
}

// The whole chain for real: labs built with netlink, the built-in engine's
// server and client started in the endpoints' namespaces, every sample
// stored in SQLite, every lab removed.
func TestPrivExecuteRealLabsAndEngine(t *testing.T) {
	testns.NeedRoot(t)
	builtin.Binary = testns.Binary(t)
	defer func() { builtin.Binary = "" }()

	e, err := Parse([]byte(`
name: wire
tests: [tcp_lat, udp_bw]
msg_sizes: [64]
duration: 300ms
warmup: 100ms
repeats: 2
rate: 100M`+hostVXLANVethArms+`  - name: nope
    topology: geneve
`), "wire.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.Open(t)
	labs := &recordingLabs{}
	var log strings.Builder
	id, err := Execute(context.Background(), e, Options{Labs: labs, Measurer: Drivers{}, Sink: StoreSink{DB: db}, Progress: &log})
	// The geneve arm cannot be built on a kernel without it: its 4 steps
	// fail with the reason, the rest is measured, and the run says so.
	var sf *StepsFailedError
	if err != nil && !(errors.As(err, &sf) && sf.Failed == 4) {
		t.Fatalf("Execute: %v\n%s", err, log.String())
	}
	if len(labs.ids) != 2 {
		t.Fatalf("built labs %v; want vxlan (shared by host and vxlan arms) and veth", labs.ids)
	}
	for _, lid := range labs.ids {
		left, _ := netns.List(runid.Prefix + lid + "-")
		if len(left) > 0 {
			t.Errorf("lab %s left namespaces: %v", lid, left)
		}
	}
	run, err := db.GetRun("last")
	if err != nil || run.ID != id || !run.Complete || !strings.HasPrefix(run.Name, "wire-") {
		t.Fatalf("stored run: %+v, %v", run, err)
	}
	// The same experiment can be stored again in the same database.
	id2, err := (StoreSink{DB: db}).Begin(e)
	if err != nil || id2 == id {
		t.Fatalf("second run of the same experiment: %d, %v", id2, err)
	}
	samples, err := db.Samples(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != len(e.Plan()) {
		t.Fatalf("stored %d samples, planned %d", len(samples), len(e.Plan()))
	}
	for _, s := range samples {
		switch {
		case s.Arm == "nope":
			if s.Error == "" || !strings.Contains(s.Error, "not supported") {
				t.Errorf("geneve arm should fail with the kernel's reason, got %q", s.Error)
			}
		case s.Error != "":
			t.Errorf("%s %s: %s\n%s", s.Arm, s.Test, s.Error, log.String())
		case s.Test == "tcp_lat":
			if s.Result.Latency == nil || s.Result.Latency.RTTNs.Count == 0 {
				t.Errorf("%s tcp_lat: no latency", s.Arm)
			}
		case s.Test == "udp_bw":
			if s.Result.UDP == nil || s.Result.UDP.Received == 0 {
				t.Errorf("%s udp_bw: nothing received", s.Arm)
			}
		}
	}
}
