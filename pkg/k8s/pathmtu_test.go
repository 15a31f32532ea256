package k8s

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/result"
)

// --path-mtu reaches the built-in engine's client pods as --path-mtu, and
// never a tool's (their servers do not answer the probes); the path a
// client's log carries comes back with its results.
func TestPathMTUPlumbing(t *testing.T) {
	f := RunFlags{Scenarios: "pod-cross-node", Tests: "tcp_lat", MsgSizes: "1", Duration: time.Second, Parallel: 1, Repeats: 1,
		Engine: "builtin,qperf", PathMTU: true}
	o, _, err := f.Options()
	if err != nil {
		t.Fatal(err)
	}
	if got := o.clientArgs("").Flags(); !slices.Contains(got, "--path-mtu") {
		t.Errorf("builtin client args %v lack --path-mtu", got)
	}
	if got := o.clientArgs("qperf").Flags(); slices.Contains(got, "--path-mtu") {
		t.Errorf("qperf client args %v have --path-mtu", got)
	}
	f.PathMTU = false
	if o, _, _ = f.Options(); slices.Contains(o.clientArgs("").Flags(), "--path-mtu") {
		t.Error("--path-mtu passed without being asked for")
	}

	mtu, mss := 1450, 1410
	r := result.New(result.Tool{Name: "cnibench"}, result.TCPLat, 1)
	r.PathMTU = &result.PathMTU{Target: "10.244.2.7:7420", Verdict: result.PathOK, MTU: &mtu, TCPMSS: &mss}
	doc, err := json.Marshal(result.Set{Schema: result.SetSchemaVersion, Results: []*result.Result{r}})
	if err != nil {
		t.Fatal(err)
	}
	set, err := ParseClientLog([]byte("path to 10.244.2.7:7420: 1450, MSS 1410\n" + string(doc) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := set.Results[0].PathMTU; p == nil || *p.MTU != 1450 || *p.TCPMSS != 1410 || !strings.HasPrefix(p.Target, "10.244.2.7") {
		t.Errorf("path from the log: %+v", p)
	}
}
