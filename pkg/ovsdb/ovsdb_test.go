package ovsdb

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/ovsdbtest"
)

func TestNotRunning(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "db.sock")
	_, err := Client{Socket: sock}.Switch(context.Background())
	if !errors.Is(err, ErrNotRunning) || err.Error() != "Open vSwitch is not running (no ovsdb socket "+sock+")" {
		t.Errorf("no socket: %v", err)
	}
}

// The Open_vSwitch row's maps, written here and read back both here and by
// ovs-vsctl, against a real ovsdb-server.
func TestSwitchMaps(t *testing.T) {
	sock := ovsdbtest.Server(t, false)
	c, ctx := Client{Socket: sock}, context.Background()
	if _, err := c.Switch(ctx); err == nil || !strings.Contains(err.Error(), "0 Open_vSwitch rows") {
		t.Errorf("before init: %v", err)
	}
	for range 2 { // twice: on an initialised database Init does nothing
		if err := c.Init(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sw, err := c.Switch(ctx)
	if err != nil || len(sw.OtherConfig) != 0 || sw.Version != "" {
		t.Fatalf("new database: %+v %v", sw, err)
	}
	if err := c.SetOtherConfig(ctx, map[string]string{"pmd-sleep-max": "300", "dpdk-init": "true"}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetOtherConfig(ctx, map[string]string{"pmd-sleep-max": "0"}); err != nil { // replaces, keeps the rest
		t.Fatal(err)
	}
	if err := c.SetExternalIDs(ctx, map[string]string{"system-id": "cnb-test"}); err != nil {
		t.Fatal(err)
	}
	ovsdbtest.Vsctl(t, sock, "--no-wait", "set", "Open_vSwitch", ".", "ovs_version=3.1.0")
	sw, err = c.Switch(ctx)
	if err != nil || !maps.Equal(sw.OtherConfig, map[string]string{"pmd-sleep-max": "0", "dpdk-init": "true"}) ||
		sw.ExternalIDs["system-id"] != "cnb-test" || sw.Version != "3.1.0" {
		t.Errorf("after set: %+v %v", sw, err)
	}
	if got := ovsdbtest.Vsctl(t, sock, "get", "Open_vSwitch", ".", "other_config:pmd-sleep-max"); strings.TrimSpace(got) != `"0"` {
		t.Errorf("ovs-vsctl reads pmd-sleep-max %s", got)
	}
	if err := c.RemoveOtherConfig(ctx, "dpdk-init", "never-set"); err != nil {
		t.Fatal(err)
	}
	if sw, _ := c.Switch(ctx); !maps.Equal(sw.OtherConfig, map[string]string{"pmd-sleep-max": "0"}) {
		t.Errorf("after remove: %v", sw.OtherConfig)
	}
}

// Bridges and ports as ovs-vsctl add-br, add-port, del-port and del-br make
// and remove them, checked by ovs-vsctl against a real ovsdb-server.
func TestBridgesAndPorts(t *testing.T) {
	sock := ovsdbtest.Server(t, true)
	c, ctx := Client{Socket: sock}, context.Background()
	if err := c.AddBridges(ctx, BridgeConfig{Name: "cnb-t-br", DatapathType: "netdev"}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddBridges(ctx, BridgeConfig{Name: "cnb-t-sys"}); err != nil {
		t.Fatal(err)
	}
	var oe *OpError
	if err := c.AddBridges(ctx, BridgeConfig{Name: "cnb-t-br"}); !errors.As(err, &oe) || !strings.HasPrefix(err.Error(), "add bridge cnb-t-br: ovsdb: constraint violation") {
		t.Errorf("the same bridge twice: %v", err)
	}
	tun := Port{Name: "cnb-t-g1", Type: "geneve", Options: map[string]string{"remote_ip": "10.0.0.2", "key": "42"}, MTURequest: 1400}
	for _, p := range []Port{tun, {Name: "cnb-t-v1"}} {
		if err := c.AddPort(ctx, "cnb-t-br", p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AddPort(ctx, "cnb-t-none", Port{Name: "cnb-t-v2"}); !errors.Is(err, ErrNoBridge) || err.Error() != "add port cnb-t-v2: no such bridge cnb-t-none" {
		t.Errorf("port on a missing bridge: %v", err)
	}

	brs, err := c.Bridges(ctx)
	if err != nil || !slices.Equal(brs, []Bridge{{"cnb-t-br", "netdev"}, {"cnb-t-sys", ""}}) {
		t.Errorf("bridges: %+v %v", brs, err)
	}
	if got := strings.Fields(ovsdbtest.Vsctl(t, sock, "list-br")); !slices.Equal(got, []string{"cnb-t-br", "cnb-t-sys"}) {
		t.Errorf("ovs-vsctl list-br: %v", got)
	}
	if got := strings.Fields(ovsdbtest.Vsctl(t, sock, "list-ports", "cnb-t-br")); !slices.Equal(got, []string{"cnb-t-g1", "cnb-t-v1"}) {
		t.Errorf("ovs-vsctl list-ports: %v", got)
	}
	for col, want := range map[string]string{"type": "geneve", "mtu_request": "1400", "options:remote_ip": `"10.0.0.2"`, "options:key": `"42"`} {
		if got := strings.TrimSpace(ovsdbtest.Vsctl(t, sock, "get", "Interface", "cnb-t-g1", col)); got != want {
			t.Errorf("ovs-vsctl get Interface cnb-t-g1 %s = %s, want %s", col, got, want)
		}
	}
	if got := strings.TrimSpace(ovsdbtest.Vsctl(t, sock, "get", "Interface", "cnb-t-br", "type")); got != "internal" {
		t.Errorf("the bridge's own port is %s, want internal", got)
	}
	ports, err := c.Ports(ctx)
	if err != nil || !slices.Equal(ports, []string{"cnb-t-br", "cnb-t-g1", "cnb-t-sys", "cnb-t-v1"}) {
		t.Errorf("ports: %v %v", ports, err)
	}

	for range 2 { // twice: deleting what is gone is fine, as --if-exists
		if err := c.DelPort(ctx, "cnb-t-g1"); err != nil {
			t.Fatal(err)
		}
		if err := c.DelBridge(ctx, "cnb-t-sys"); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Fields(ovsdbtest.Vsctl(t, sock, "list-ports", "cnb-t-br")); !slices.Equal(got, []string{"cnb-t-v1"}) {
		t.Errorf("after del-port, ovs-vsctl list-ports: %v", got)
	}
	if err := c.DelBridge(ctx, "cnb-t-br"); err != nil {
		t.Fatal(err)
	}
	// The bridges' ports and interfaces went with them.
	if got := ovsdbtest.Vsctl(t, sock, "--columns=name", "--no-headings", "find", "Interface"); strings.TrimSpace(got) != "" {
		t.Errorf("interfaces left: %s", got)
	}
	if brs, _ := c.Bridges(ctx); len(brs) != 0 {
		t.Errorf("bridges left: %v", brs)
	}
}

func TestAddBridgeNotInitialized(t *testing.T) {
	c := Client{Socket: ovsdbtest.Server(t, false)}
	if err := c.AddBridges(context.Background(), BridgeConfig{Name: "cnb-t-br"}); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("before init: %v", err)
	}
}
