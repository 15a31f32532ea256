package tune

import (
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/safchain/ethtool"
)

// SetOffloads turns whole `ethtool -K` groups off inside a namespace, reads
// back as the kernel reports them, and refuses an unknown name.
func TestPrivSetOffloads(t *testing.T) {
	p := testns.NewPair(t)
	features := func() map[string]ethtool.FeatureState {
		var fs map[string]ethtool.FeatureState
		if err := netns.Do(p.A, func() error {
			et, err := ethtool.NewEthtool()
			if err != nil {
				return err
			}
			defer et.Close()
			fs, err = et.FeaturesWithState("eth0")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return fs
	}
	if fixed, err := SetOffloads(p.A, "eth0", map[string]bool{"gro": false, "tso": false, "tx": false}); err != nil || len(fixed) != 0 {
		t.Fatalf("SetOffloads: fixed %v, %v", fixed, err)
	}
	fs := features()
	for _, f := range []string{"rx-gro", "tx-tcp-segmentation", "tx-tcp6-segmentation", "tx-checksum-ip-generic"} {
		if fs[f].Active {
			t.Errorf("%s still on after SetOffloads", f)
		}
	}
	if _, err := SetOffloads(p.A, "eth0", map[string]bool{"gro": true}); err != nil || !features()["rx-gro"].Active {
		t.Errorf("gro back on: %v", err)
	}
	if _, err := SetOffloads(p.A, "eth0", map[string]bool{"turbo": false}); err == nil {
		t.Error("an unknown offload was accepted")
	}
}
