package lab

import (
	"context"
	"errors"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/probe"
)

// `cnibench probe` and `lab up` agree: every preset whose capability the
// probe calls absent fails with ErrNotSupported and leaves nothing, and
// every one it calls present builds.
func TestPrivProbeAgreesWithLab(t *testing.T) {
	testns.HostWide(t)
	testns.NeedRoot(t)
	r, err := probe.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]*bool{}
	for _, c := range r.Capabilities {
		has[c.ID] = c.Supported
	}
	// OVN needs both of its halves: the preset's capability is their
	// conjunction.
	if c, h := has["ovn-central"], has["ovn-host"]; c != nil && h != nil {
		both := *c && *h
		has["ovn"] = &both
	}
	for preset, capID := range map[string]string{TopoVXLAN: "vxlan", TopoGeneve: "geneve", TopoIPIP: "ipip", TopoOVSNetdev: "ovs-userspace",
		TopoOVNOverlay: "ovn", TopoOVNUnderlay: "ovn"} {
		t.Run(preset, func(t *testing.T) {
			ok := has[capID]
			if ok == nil {
				t.Skipf("probe could not decide %s", capID)
			}
			s, _ := Preset(preset)
			l, err := Up(context.Background(), s, UpOptions{})
			if *ok {
				if err != nil {
					t.Fatalf("probe says %s is supported, lab up fails: %v", capID, err)
				}
				if err := l.Down(context.Background()); err != nil {
					t.Error(err)
				}
				assertClean(t, l.ID)
				return
			}
			if err == nil {
				_ = l.Down(context.Background())
				t.Fatalf("probe says %s is not supported, yet lab up built it", capID)
			}
			if !errors.Is(err, ErrNotSupported) {
				t.Fatalf("probe says %s is not supported; lab up failed otherwise: %v", capID, err)
			}
		})
	}
}
