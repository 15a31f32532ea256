package ovsdb

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/ovsdbtest"
)

// A whole switch in one transaction, read back by ovs-vsctl; a second
// Configure on the now initialised database is refused and changes nothing.
func TestConfigure(t *testing.T) {
	sock := ovsdbtest.Server(t, false)
	c, ctx := Client{Socket: sock}, context.Background()
	cfg := Config{
		ExternalIDs: map[string]string{"system-id": "cnb-t-n1", "ovn-encap-type": "geneve"},
		OtherConfig: map[string]string{"pmd-maxsleep": "50"},
		Bridges: []BridgeConfig{
			{Name: "cnb-t-int", DatapathType: "netdev", FailMode: "secure", OtherConfig: map[string]string{"disable-in-band": "true"},
				Ports: []Port{{Name: "cnb-t-h0", ExternalIDs: map[string]string{"iface-id": "client.default"}},
					{Name: "cnb-t-h1", Type: "dpdk", Options: map[string]string{"dpdk-devargs": "net_af_packet0,iface=cnb-t-h1"}, MTURequest: 1400}}},
			{Name: "cnb-t-ul", DatapathType: "netdev", Ports: []Port{{Name: "cnb-t-u"}}},
		},
	}
	if err := c.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(ovsdbtest.Vsctl(t, sock, "list-br")); !slices.Equal(got, []string{"cnb-t-int", "cnb-t-ul"}) {
		t.Errorf("bridges %v", got)
	}
	if got := strings.Fields(ovsdbtest.Vsctl(t, sock, "list-ports", "cnb-t-int")); !slices.Equal(got, []string{"cnb-t-h0", "cnb-t-h1"}) {
		t.Errorf("ports of the integration bridge %v", got)
	}
	for _, q := range []struct{ args, want string }{
		{"get Open_vSwitch . external_ids:system-id", "cnb-t-n1"},
		{"get Open_vSwitch . other_config:pmd-maxsleep", `"50"`},
		{"get Bridge cnb-t-int fail_mode", "secure"},
		{"get Bridge cnb-t-int datapath_type", "netdev"},
		{"get Bridge cnb-t-int other_config:disable-in-band", `"true"`},
		{"get Interface cnb-t-int type", "internal"},
		{"get Interface cnb-t-h0 external_ids:iface-id", "client.default"},
		{"get Interface cnb-t-h1 type", "dpdk"},
		{"get Interface cnb-t-h1 mtu_request", "1400"},
		{"get Interface cnb-t-h1 options:dpdk-devargs", `"net_af_packet0,iface=cnb-t-h1"`},
	} {
		if got := strings.TrimSpace(ovsdbtest.Vsctl(t, sock, strings.Fields(q.args)...)); got != q.want {
			t.Errorf("ovs-vsctl %s = %s, want %s", q.args, got, q.want)
		}
	}
	if err := c.Configure(ctx, Config{ExternalIDs: map[string]string{"system-id": "other"}}); !errors.Is(err, ErrInitialized) {
		t.Errorf("second Configure: %v, want ErrInitialized", err)
	}
	if sw, err := c.Switch(ctx); err != nil || sw.ExternalIDs["system-id"] != "cnb-t-n1" {
		t.Errorf("after the refused Configure: %+v %v", sw, err)
	}
}

// A wait is held by the server until a row matching it exists, and times
// out with ErrWaitTimedOut when none comes; a cancelled context ends it.
func TestWaitFor(t *testing.T) {
	db := DB{Socket: ovsdbtest.ServerOf(t, ovsdbtest.SBSchema), Name: "OVN_Southbound"}
	ctx := context.Background()
	chassis := Wait("Chassis", []any{Cond("name", "==", "n2")}, 5*time.Second)
	start := time.Now()
	if err := db.WaitFor(ctx, Wait("Chassis", []any{Cond("name", "==", "n2")}, 200*time.Millisecond)); !errors.Is(err, ErrWaitTimedOut) {
		t.Fatalf("no chassis: %v, want ErrWaitTimedOut", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 3*time.Second {
		t.Errorf("a 200 ms wait took %v", d)
	}
	done := make(chan error, 1)
	go func() { done <- db.WaitFor(ctx, chassis) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the wait ended before the row existed: %v", err)
	default:
	}
	if _, err := db.Transact(ctx, Op{"op": "insert", "table": "Encap", "uuid-name": "e",
		"row": map[string]any{"type": "geneve", "ip": "10.0.0.2", "chassis_name": "n2"}},
		Op{"op": "insert", "table": "Chassis", "row": map[string]any{"name": "n2", "hostname": "n2", "encaps": NamedUUID("e")}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("wait after the row came: %v", err)
	}
	rows, err := db.Select(ctx, "Chassis", []any{Cond("name", "==", "n2")}, "name", "hostname")
	if err != nil || len(rows) != 1 || rows[0].String("hostname") != "n2" {
		t.Errorf("select: %v %v", rows, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	if err := db.WaitFor(cctx, Wait("Chassis", []any{Cond("name", "==", "n3")}, 5*time.Second)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v, want context.Canceled", err)
	}
}

// Sync raises nb_cfg and returns once the column it waits on reaches it,
// as ovn-northd (sb_cfg) or every chassis (hv_cfg) would raise it.
func TestSync(t *testing.T) {
	db := DB{Socket: ovsdbtest.ServerOf(t, ovsdbtest.NBSchema), Name: "OVN_Northbound"}
	ctx := context.Background()
	if _, err := db.Transact(ctx, Op{"op": "insert", "table": "NB_Global", "row": map[string]any{"nb_cfg": 4}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Sync(ctx, "hv_cfg", 200*time.Millisecond); !errors.Is(err, ErrWaitTimedOut) || !strings.Contains(err.Error(), "hv_cfg to reach nb_cfg 5") {
		t.Fatalf("nobody raised hv_cfg: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- db.Sync(ctx, "hv_cfg", 5*time.Second) }()
	// Play ovn-northd: once nb_cfg is 6, copy it to hv_cfg.
	if err := db.WaitFor(ctx, Wait("NB_Global", []any{Cond("nb_cfg", "==", 6)}, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Transact(ctx, Op{"op": "update", "table": "NB_Global", "where": []any{}, "row": map[string]any{"hv_cfg": 6}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("sync after hv_cfg reached nb_cfg: %v", err)
	}
}
