package tune

import (
	"encoding/json"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/fixture"
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
// JSON-RPC client against the real server.
func TestOVSRealOVSDB(t *testing.T) {
	schema := "/usr/share/openvswitch/vswitch.ovsschema"
	server, err := exec.LookPath("ovsdb-server")
	if err != nil {
		t.Skip("ovsdb-server not installed (scripts/install-deps.sh installs openvswitch-switch)")
	}
	if _, err := os.Stat(schema); err != nil {
		t.Skip("no " + schema)
	}
	dir := t.TempDir()
	db, sock := filepath.Join(dir, "conf.db"), filepath.Join(dir, "db.sock")
	if out, err := exec.Command("ovsdb-tool", "create", db, schema).CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool create: %v\n%s", err, out)
	}
	srv := exec.Command(server, db, "--remote=punix:"+sock, "--unixctl="+filepath.Join(dir, "ctl"), "--no-chdir")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The Open_vSwitch table starts empty; ovs-vsctl init adds its one row,
	// as the openvswitch-switch service does at boot.
	if out, err := exec.Command("ovs-vsctl", "--db=unix:"+sock, "--no-wait", "init").CombinedOutput(); err != nil {
		t.Fatalf("ovs-vsctl init: %v\n%s", err, out)
	}
	if err := ovsOtherConfigSet(sock, "pmd-sleep-max", "300", false); err != nil {
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
	m, _, err := ovsOtherConfigGet(sock)
	if err != nil || m["pmd-sleep-max"] != "0" {
		t.Fatalf("after apply: %v %v", m, err)
	}
	// Cross-check with ovs-vsctl, the tool users know.
	out, err := exec.Command("ovs-vsctl", "--db=unix:"+sock, "get", "Open_vSwitch", ".", "other_config:pmd-sleep-max").Output()
	if err != nil || strings.TrimSpace(string(out)) != `"0"` {
		t.Errorf("ovs-vsctl get: %q %v", out, err)
	}
	if _, _, err := RollbackAll(e, jdir); err != nil {
		t.Fatal(err)
	}
	if m, _, _ := ovsOtherConfigGet(sock); m["pmd-sleep-max"] != "300" {
		t.Errorf("after rollback: %v", m)
	}

	// A switch that says it is OVS 3.1 (Debian 12's) reads pmd-maxsleep:
	// the knob writes that key, leaves the newer one alone, and rolls back.
	if out, err := exec.Command("ovs-vsctl", "--db=unix:"+sock, "--no-wait", "set", "Open_vSwitch", ".", "ovs_version=3.1.0").CombinedOutput(); err != nil {
		t.Fatalf("ovs-vsctl set ovs_version: %v\n%s", err, out)
	}
	if err := ovsOtherConfigSet(sock, "pmd-maxsleep", "200", false); err != nil {
		t.Fatal(err)
	}
	jdir = t.TempDir()
	if rep, err := Apply(ApplyOptions{Env: e, Profile: Latency, Knobs: []*Knob{k}, JournalDir: jdir}); err != nil || len(rep.Changes) != 1 {
		t.Fatalf("apply on 3.1: %+v %v", rep, err)
	}
	if m, v, _ := ovsOtherConfigGet(sock); m["pmd-maxsleep"] != "0" || m["pmd-sleep-max"] != "300" || v != "3.1.0" {
		t.Errorf("after apply on 3.1 (%s): %v, want pmd-maxsleep=0 and pmd-sleep-max untouched", v, m)
	}
	if _, _, err := RollbackAll(e, jdir); err != nil {
		t.Fatal(err)
	}
	if m, _, _ := ovsOtherConfigGet(sock); len(m) != 2 || m["pmd-sleep-max"] != "300" || m["pmd-maxsleep"] != "200" {
		t.Errorf("after rollback on 3.1: %v, want pmd-maxsleep=200 back and pmd-sleep-max=300 untouched", m)
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
