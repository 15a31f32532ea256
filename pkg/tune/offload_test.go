package tune

import (
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/safchain/ethtool"
)

// Journal.SetOffloads turns whole `ethtool -K` groups off inside a
// namespace through the ioctl, journaled; Rollback brings every feature
// back as it was (those the kernel changed along with them too), and an
// unknown name is refused before anything is written.
func TestPrivJournalOffloads(t *testing.T) {
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
	before := features()
	j := openJournal(t, JournalOptions{Dir: t.TempDir(), Scope: "test"})
	if fixed, err := j.SetOffloads(p.A, "eth0", map[string]bool{"gro": false, "tso": false, "tx": false}); err != nil || len(fixed) != 0 {
		t.Fatalf("SetOffloads: fixed %v, %v", fixed, err)
	}
	fs := features()
	for _, f := range []string{"rx-gro", "tx-tcp-segmentation", "tx-tcp6-segmentation", "tx-checksum-ip-generic"} {
		if fs[f].Active {
			t.Errorf("%s still on after SetOffloads", f)
		}
	}
	if _, err := j.SetOffloads(p.A, "eth0", map[string]bool{"turbo": false}); err == nil {
		t.Error("an unknown offload was accepted")
	}
	if j.Seq() != 1 {
		t.Errorf("%d changes journaled, want 1 (the refused one is not)", j.Seq())
	}
	j.Close()
	wantRollback(t, DefaultEnv(), j.Path(), 1)
	after := features()
	for f, st := range before {
		if after[f].Active != st.Active {
			t.Errorf("%s: active=%v after rollback, %v before", f, after[f].Active, st.Active)
		}
	}
}
