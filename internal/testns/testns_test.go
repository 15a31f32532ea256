package testns

import (
	"testing"

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
