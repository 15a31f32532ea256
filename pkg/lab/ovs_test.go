package lab

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/ovsdbtest"
	"github.com/cnibench/cnibench/pkg/ovsdb"
)

// fakeVswitchd acknowledges every change to the switch at sock as
// ovs-vswitchd would once its datapath matches: it copies next_cfg into
// cur_cfg, until the test ends.
func fakeVswitchd(t *testing.T, sock string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		db := ovsdb.DB{Socket: sock, Name: ovsdb.Database}
		for ctx.Err() == nil {
			rows, err := db.Select(ctx, "Open_vSwitch", []any{}, "next_cfg")
			if err == nil && len(rows) == 1 {
				_, _ = db.Transact(ctx, ovsdb.Op{"op": "update", "table": "Open_vSwitch", "where": []any{},
					"row": map[string]any{"cur_cfg": rows[0]["next_cfg"]}})
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
}

// `lab clean` on the host's switch removes the bridges of the matched run
// and the ports of that run someone added to a bridge of their own, and
// nothing else — checked with ovs-vsctl against a private ovsdb-server
// standing in for the host's.
func TestCleanHostOVS(t *testing.T) {
	sock := ovsdbtest.Server(t, true)
	old := ovsRunDir
	ovsRunDir = filepath.Dir(sock)
	t.Cleanup(func() { ovsRunDir = old })
	fakeVswitchd(t, sock)
	ctx := context.Background()
	err := hostSwitch().AddBridges(ctx,
		ovsdb.BridgeConfig{Name: "cnb-aaaa-br", DatapathType: "netdev", Ports: []ovsdb.Port{{Name: "cnb-aaaa-c"}}},
		ovsdb.BridgeConfig{Name: "cnb-bbbb-br", Ports: []ovsdb.Port{{Name: "cnb-bbbb-c"}}},
		ovsdb.BridgeConfig{Name: "user-br", Ports: []ovsdb.Port{{Name: "cnb-aaaa-p"}, {Name: "cnb-bbbb-p"}, {Name: "eth9"}}})
	if err != nil {
		t.Fatal(err)
	}
	ours := func(name string) bool { return strings.HasPrefix(name, "cnb-aaaa-") }
	removed, errs := cleanHostOVS(ctx, ours)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if want := []string{"ovs bridge cnb-aaaa-br", "ovs port cnb-aaaa-p"}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	if got := strings.Fields(ovsdbtest.Vsctl(t, sock, "list-br")); !slices.Equal(got, []string{"cnb-bbbb-br", "user-br"}) {
		t.Errorf("bridges left %v", got)
	}
	if got := strings.Fields(ovsdbtest.Vsctl(t, sock, "list-ports", "user-br")); !slices.Equal(got, []string{"cnb-bbbb-p", "eth9"}) {
		t.Errorf("ports left on user-br %v", got)
	}
	// Again: nothing of the run is left, nothing is removed.
	if removed, errs := cleanHostOVS(ctx, ours); len(removed)+len(errs) > 0 {
		t.Errorf("second clean: removed %v, errors %v", removed, errs)
	}
}
