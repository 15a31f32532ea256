package tune

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cnibench/cnibench/internal/fixture"
	"github.com/cnibench/cnibench/internal/ovsdbtest"
	"github.com/cnibench/cnibench/pkg/ovsdb"
)

// fakeOVSDB answers the two OVSDB operations the OVS knobs use (select and
// mutate of Open_vSwitch.other_config, select of Bridge) over a unix socket,
// speaking RFC 7047 JSON-RPC like ovsdb-server.
type fakeOVSDB struct {
	mu      sync.Mutex
	other   map[string]string
	bridges map[string]string
}

func (f *fakeOVSDB) serve(t *testing.T) string {
	sock := filepath.Join(t.TempDir(), "db.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fixture.Serve(t, l, f.handle)
	return sock
}

func (f *fakeOVSDB) handle(c net.Conn) {
	defer c.Close()
	var req struct {
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
		ID     any               `json:"id"`
	}
	if err := json.NewDecoder(c).Decode(&req); err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var results []any
	for _, raw := range req.Params[1:] {
		var op struct {
			Op        string  `json:"op"`
			Table     string  `json:"table"`
			Mutations [][]any `json:"mutations"`
		}
		_ = json.Unmarshal(raw, &op)
		switch {
		case op.Op == "select" && op.Table == "Open_vSwitch":
			var pairs [][]string
			for k, v := range f.other {
				pairs = append(pairs, []string{k, v})
			}
			if pairs == nil {
				pairs = [][]string{}
			}
			results = append(results, map[string]any{"rows": []any{map[string]any{"other_config": []any{"map", pairs}}}})
		case op.Op == "select" && op.Table == "Bridge":
			var rows []any
			for n, dp := range f.bridges {
				rows = append(rows, map[string]any{"name": n, "datapath_type": dp})
			}
			results = append(results, map[string]any{"rows": rows})
		case op.Op == "mutate":
			for _, m := range op.Mutations {
				val := m[2].([]any)
				switch m[1] {
				case "delete":
					for _, k := range val[1].([]any) {
						delete(f.other, k.(string))
					}
				case "insert":
					for _, p := range val[1].([]any) {
						kv := p.([]any)
						if _, ok := f.other[kv[0].(string)]; !ok { // OVSDB insert keeps existing keys
							f.other[kv[0].(string)] = kv[1].(string)
						}
					}
				}
			}
			results = append(results, map[string]any{"count": 1})
		default:
			results = append(results, map[string]any{"error": "not supported", "details": op.Op})
		}
	}
	_ = json.NewEncoder(c).Encode(map[string]any{"id": req.ID, "result": results, "error": nil})
}

func TestOVSKnobsApplyRollback(t *testing.T) {
	f := &fakeOVSDB{other: map[string]string{"pmd-sleep-max": "500"}, bridges: map[string]string{"br-int": "", "br-dp": "netdev"}}
	e := fixtureEnv("testdata/vm")
	e.OVSDB = f.serve(t)
	var ks []*Knob
	for _, k := range Knobs() {
		if k.Scope == ScopeOVS {
			ks = append(ks, k)
		}
	}
	fs := Audit(e, ks, Profiles())
	if x := one(t, fs, "ovs.datapath_type", "br-int", Latency); x.Current != "system" {
		t.Errorf("br-int datapath: %+v", x)
	}
	if x := one(t, fs, "ovs.datapath_type", "br-dp", Latency); x.Current != "netdev" {
		t.Errorf("br-dp datapath: %+v", x)
	}
	if x := one(t, fs, "ovs.pmd-sleep-max", "", Latency); x.Status != StatusDiffers || x.Current != "500" {
		t.Errorf("pmd-sleep-max: %+v", x)
	}
	if x := one(t, fs, "ovs.userspace-tso-enable", "", Throughput); x.Status != StatusDiffers || x.Current != "(unset: false)" {
		t.Errorf("userspace-tso-enable: %+v", x)
	}

	jdir := t.TempDir()
	for _, p := range Profiles() {
		rep, err := Apply(ApplyOptions{Env: e, Profile: p, Knobs: ks, JournalDir: jdir})
		if err != nil || rep.Failed() > 0 {
			t.Fatalf("apply %s: %+v %v", p, rep, err)
		}
	}
	f.mu.Lock()
	got := map[string]string{}
	for k, v := range f.other {
		got[k] = v
	}
	f.mu.Unlock()
	want := map[string]string{"pmd-sleep-max": "0", "userspace-tso-enable": "true", "userspace-sock-buf-size": "1073741823"}
	if !maps.Equal(got, want) {
		t.Errorf("other_config after apply = %v, want %v", got, want)
	}
	if _, _, err := RollbackAll(e, jdir); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !maps.Equal(f.other, map[string]string{"pmd-sleep-max": "500"}) {
		t.Errorf("other_config after rollback = %v: keys that were unset must be removed, others restored", f.other)
	}
}

// TestOVSRealOVSDB runs a private ovsdb-server (own database and socket in a
// temporary directory; the system's OVS is not touched) and checks the
// knobs' JSON-RPC path (pkg/ovsdb) against the real server.
func TestOVSRealOVSDB(t *testing.T) {
	sock := ovsdbtest.Server(t, true)
	db := ovsdb.Client{Socket: sock}
	if err := db.SetOtherConfig(context.Background(), map[string]string{"pmd-sleep-max": "300"}); err != nil {
		t.Fatal(err)
	}
	e := fixtureEnv("testdata/vm")
	e.OVSDB = sock
	k, _ := Lookup("ovs.pmd-sleep-max")
	jdir := t.TempDir()
	rep, err := Apply(ApplyOptions{Env: e, Profile: Latency, Knobs: []*Knob{k}, JournalDir: jdir})
	if err != nil || len(rep.Changes) != 1 || rep.Failed() != 0 {
		t.Fatalf("apply: %+v %v", rep, err)
	}
	sw, err := db.Switch(context.Background())
	if err != nil || sw.OtherConfig["pmd-sleep-max"] != "0" {
		t.Fatalf("after apply: %v %v", sw.OtherConfig, err)
	}
	// Cross-check with ovs-vsctl, the tool users know.
	if out := ovsdbtest.Vsctl(t, sock, "get", "Open_vSwitch", ".", "other_config:pmd-sleep-max"); strings.TrimSpace(out) != `"0"` {
		t.Errorf("ovs-vsctl get: %q", out)
	}
	if _, _, err := RollbackAll(e, jdir); err != nil {
		t.Fatal(err)
	}
	if sw, _ := db.Switch(context.Background()); sw.OtherConfig["pmd-sleep-max"] != "300" {
		t.Errorf("after rollback: %v", sw.OtherConfig)
	}

	// A switch that says it is OVS 3.1 (Debian 12's) reads pmd-maxsleep:
	// the knob writes that key, leaves the newer one alone, and rolls back.
	ovsdbtest.Vsctl(t, sock, "--no-wait", "set", "Open_vSwitch", ".", "ovs_version=3.1.0")
	if err := db.SetOtherConfig(context.Background(), map[string]string{"pmd-maxsleep": "200"}); err != nil {
		t.Fatal(err)
	}
	jdir = t.TempDir()
	if rep, err := Apply(ApplyOptions{Env: e, Profile: Latency, Knobs: []*Knob{k}, JournalDir: jdir}); err != nil || len(rep.Changes) != 1 {
		t.Fatalf("apply on 3.1: %+v %v", rep, err)
	}
	if sw, _ := db.Switch(context.Background()); sw.OtherConfig["pmd-maxsleep"] != "0" || sw.OtherConfig["pmd-sleep-max"] != "300" || sw.Version != "3.1.0" {
		t.Errorf("after apply on 3.1 (%s): %v, want pmd-maxsleep=0 and pmd-sleep-max untouched", sw.Version, sw.OtherConfig)
	}
	if _, _, err := RollbackAll(e, jdir); err != nil {
		t.Fatal(err)
	}
	if sw, _ := db.Switch(context.Background()); len(sw.OtherConfig) != 2 || sw.OtherConfig["pmd-sleep-max"] != "300" || sw.OtherConfig["pmd-maxsleep"] != "200" {
		t.Errorf("after rollback on 3.1: %v, want pmd-maxsleep=200 back and pmd-sleep-max=300 untouched", sw.OtherConfig)
	}
}

func TestOVSKeyFor(t *testing.T) {
	for _, c := range []struct{ key, version, want string }{
		{"pmd-sleep-max", "3.1.0", "pmd-maxsleep"}, {"pmd-sleep-max", "2.17.9", "pmd-maxsleep"},
		{"pmd-sleep-max", "3.2.0", "pmd-sleep-max"}, {"pmd-sleep-max", "3.10.1", "pmd-sleep-max"},
		{"pmd-sleep-max", "", "pmd-sleep-max"}, {"pmd-sleep-max", "weird", "pmd-sleep-max"},
		{"userspace-tso-enable", "3.1.0", "userspace-tso-enable"},
	} {
		if got := ovsKeyFor(c.key, c.version); got != c.want {
			t.Errorf("ovsKeyFor(%q, %q) = %q, want %q", c.key, c.version, got, c.want)
		}
	}
}
