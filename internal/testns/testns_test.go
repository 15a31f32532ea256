package testns

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/netns"
)

func TestPrivPairCreatedAndRemoved(t *testing.T) {
	var p *Pair
	t.Run("create", func(t *testing.T) {
		p = NewPair(t)
		if !netns.Exists(p.A) || !netns.Exists(p.B) {
			t.Fatal("namespaces missing")
		}
	})
	if p != nil && (netns.Exists(p.A) || netns.Exists(p.B)) {
		t.Fatal("cleanup left namespaces behind")
	}
}

// Repeat keeps calling f until stop, and nothing calls f once stop has
// returned (the tests read f's effects right after); stop may be called
// again.
func TestRepeat(t *testing.T) {
	for _, every := range []time.Duration{0, time.Millisecond} {
		var n atomic.Int64
		stop := Repeat(t, every, func() { n.Add(1) })
		for n.Load() < 3 {
			time.Sleep(time.Millisecond)
		}
		stop()
		after := n.Load()
		time.Sleep(5 * time.Millisecond)
		stop()
		if n.Load() != after {
			t.Errorf("every %v: f called %d times after stop returned", every, n.Load()-after)
		}
	}
}
