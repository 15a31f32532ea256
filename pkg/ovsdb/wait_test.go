package ovsdb

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/ovsdbtest"
)

// Several bridges with their ports in one transaction, read back by
// ovs-vsctl; a second call of which one port clashes adds nothing at all.
func TestAddBridges(t *testing.T) {
	sock := ovsdbtest.Server(t, true)
	c, ctx := Client{Socket: sock}, context.Background()
	phy := BridgeConfig{Name: "cnb-t-x1", DatapathType: "netdev", Ports: []Port{{Name: "cnb-t-u"}}}
	intBr := BridgeConfig{Name: "cnb-t-i1", DatapathType: "netdev", Ports: []Port{
		{Name: "cnb-t-h1"},
		{Name: "cnb-t-g1", Type: "geneve", Options: map[string]string{"remote_ip": "10.0.0.2", "key": "42"}},
		{Name: "cnb-t-d1", Type: "dpdk", Options: map[string]string{"dpdk-devargs": "net_af_packet0,iface=cnb-t-d1,framecnt=2048"}, MTURequest: 1450},
	}}
	if err := c.AddBridges(ctx, phy, intBr); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(ovsdbtest.Vsctl(t, sock, "list-br")); !slices.Equal(got, []string{"cnb-t-i1", "cnb-t-x1"}) {
		t.Errorf("ovs-vsctl list-br: %v", got)
	}
	for br, want := range map[string][]string{"cnb-t-x1": {"cnb-t-u"}, "cnb-t-i1": {"cnb-t-d1", "cnb-t-g1", "cnb-t-h1"}} {
		if got := strings.Fields(ovsdbtest.Vsctl(t, sock, "list-ports", br)); !slices.Equal(got, want) {
			t.Errorf("ovs-vsctl list-ports %s: %v, want %v", br, got, want)
		}
	}
	for _, q := range []struct{ args, want string }{
		{"get Bridge cnb-t-x1 datapath_type", "netdev"},
		{"get Bridge cnb-t-i1 datapath_type", "netdev"},
		{"get Interface cnb-t-i1 type", "internal"},
		{"get Interface cnb-t-u type", `""`},
		{"get Interface cnb-t-g1 type", "geneve"},
		{"get Interface cnb-t-g1 options", `{key="42", remote_ip="10.0.0.2"}`},
		{"get Interface cnb-t-d1 type", "dpdk"},
		{"get Interface cnb-t-d1 options:dpdk-devargs", `"net_af_packet0,iface=cnb-t-d1,framecnt=2048"`},
		{"get Interface cnb-t-d1 mtu_request", "1450"},
	} {
		if got := strings.TrimSpace(ovsdbtest.Vsctl(t, sock, strings.Fields(q.args)...)); got != q.want {
			t.Errorf("ovs-vsctl %s = %s, want %s", q.args, got, q.want)
		}
	}
	err := c.AddBridges(ctx, BridgeConfig{Name: "cnb-t-new"}, BridgeConfig{Name: "cnb-t-x2", Ports: []Port{{Name: "cnb-t-u"}}})
	var oe *OpError
	if !errors.As(err, &oe) || !strings.HasPrefix(err.Error(), "add bridge cnb-t-new, cnb-t-x2: ovsdb: constraint violation") {
		t.Errorf("a port that exists: %v", err)
	}
	if brs, _ := c.Bridges(ctx); len(brs) != 2 {
		t.Errorf("after the refused call, bridges %v: want the two of before", brs)
	}
}

// vswitchd plays ovs-vswitchd on sock: once next_cfg reaches next it sets
// applied, then copies next_cfg into cur_cfg, as the daemon does when its
// datapath matches the database.
func vswitchd(t *testing.T, sock string, next int64, applied *atomic.Bool) <-chan error {
	done := make(chan error, 1)
	go func() {
		db, ctx := DB{Socket: sock, Name: Database}, context.Background()
		if err := db.WaitFor(ctx, Wait("Open_vSwitch", []any{Cond("next_cfg", ">=", next)}, 5*time.Second)); err != nil {
			done <- err
			return
		}
		time.Sleep(100 * time.Millisecond) // a reconfiguration takes time
		applied.Store(true)
		_, err := db.Transact(ctx, Op{"op": "update", "table": "Open_vSwitch", "where": all, "row": map[string]any{"cur_cfg": next}})
		done <- err
	}()
	return done
}

// With Wait, a change returns once ovs-vswitchd applied it (cur_cfg
// reached the next_cfg the change raised), as ovs-vsctl without --no-wait;
// without a vswitchd it fails after Wait with ErrNotApplied, a delete with
// nothing to delete does not wait, and a cancelled context ends the wait.
func TestChangeWaitsForVswitchd(t *testing.T) {
	sock := ovsdbtest.Server(t, true)
	ctx := context.Background()
	c := Client{Socket: sock, Wait: 5 * time.Second}

	var applied atomic.Bool
	done := vswitchd(t, sock, 1, &applied)
	if err := c.AddBridges(ctx, BridgeConfig{Name: "cnb-t-br", DatapathType: "netdev", Ports: []Port{{Name: "cnb-t-v1"}}}); err != nil {
		t.Fatal(err)
	}
	if !applied.Load() {
		t.Error("AddBridges returned before ovs-vswitchd applied the change")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(ovsdbtest.Vsctl(t, sock, "get", "Open_vSwitch", ".", "next_cfg")); got != "1" {
		t.Errorf("next_cfg %s after one change, want 1", got)
	}

	// Nothing to delete: returns at once, next_cfg untouched, as ovs-vsctl
	// does with a transaction that changed nothing.
	start := time.Now()
	if err := c.DelPort(ctx, "cnb-t-none"); err != nil || time.Since(start) > time.Second {
		t.Errorf("deleting a missing port: %v after %v", err, time.Since(start))
	}
	applied.Store(false)
	done = vswitchd(t, sock, 2, &applied)
	if err := c.DelPort(ctx, "cnb-t-v1"); err != nil || !applied.Load() {
		t.Errorf("del port: %v, applied %v", err, applied.Load())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// No vswitchd: the database has the change, the call says it was not
	// applied.
	c.Wait = 300 * time.Millisecond
	start = time.Now()
	err := c.DelBridge(ctx, "cnb-t-br")
	if !errors.Is(err, ErrNotApplied) || strings.Contains(err.Error(), "\n") ||
		err.Error() != "delete bridge cnb-t-br: not applied: ovs-vswitchd did not apply it (cur_cfg to reach 3) within 300ms; is it running? its log says why" {
		t.Errorf("no vswitchd: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Errorf("a 300 ms wait took %v", d)
	}
	if brs, _ := c.Bridges(ctx); len(brs) != 0 {
		t.Errorf("bridges %v: the database committed the delete", brs)
	}

	c.Wait = 5 * time.Second
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	if err := c.AddBridges(cctx, BridgeConfig{Name: "cnb-t-br2"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v, want context.Canceled", err)
	}
}

// DPDKInitialized and Interface read what ovs-vswitchd reports (written
// here with ovs-vsctl, as the daemon would).
func TestDPDKInitializedAndInterface(t *testing.T) {
	sock := ovsdbtest.Server(t, true)
	c, ctx := Client{Socket: sock}, context.Background()
	if ok, err := c.DPDKInitialized(ctx); err != nil || ok {
		t.Errorf("new switch: dpdk_initialized %v %v, want false", ok, err)
	}
	ovsdbtest.Vsctl(t, sock, "--no-wait", "set", "Open_vSwitch", ".", "dpdk_initialized=true")
	if ok, err := c.DPDKInitialized(ctx); err != nil || !ok {
		t.Errorf("after set: dpdk_initialized %v %v, want true", ok, err)
	}
	if err := c.AddBridges(ctx, BridgeConfig{Name: "cnb-t-br", Ports: []Port{{Name: "cnb-t-d1", Type: "dpdk"}, {Name: "cnb-t-v1"}}}); err != nil {
		t.Fatal(err)
	}
	if i, ok, err := c.Interface(ctx, "cnb-t-v1"); err != nil || !ok || i != (Interface{Name: "cnb-t-v1"}) {
		t.Errorf("before vswitchd: %+v %v %v", i, ok, err)
	}
	ovsdbtest.Vsctl(t, sock, "--no-wait", "set", "Interface", "cnb-t-d1", "ofport=-1", `error="could not open network device cnb-t-d1"`)
	ovsdbtest.Vsctl(t, sock, "--no-wait", "set", "Interface", "cnb-t-v1", "ofport=2")
	if i, ok, err := c.Interface(ctx, "cnb-t-d1"); err != nil || !ok || i != (Interface{Name: "cnb-t-d1", OFPort: -1, Error: "could not open network device cnb-t-d1"}) {
		t.Errorf("failed interface: %+v %v %v", i, ok, err)
	}
	if i, ok, err := c.Interface(ctx, "cnb-t-v1"); err != nil || !ok || i != (Interface{Name: "cnb-t-v1", OFPort: 2}) {
		t.Errorf("set up interface: %+v %v %v", i, ok, err)
	}
	if _, ok, err := c.Interface(ctx, "cnb-t-none"); err != nil || ok {
		t.Errorf("missing interface: ok %v %v", ok, err)
	}
}
