package engine

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/cnibench/cnibench/pkg/pathmtu"
	"github.com/cnibench/cnibench/pkg/result"
)

// A cnibench server answers path MTU probes on its UDP port — the largest
// IPv4 packet there is over loopback, more than its reader's buffer holds
// — and its TCP port gives the MSS reading a connection; a measurement
// after them runs as before.
func TestServerAnswersPathMTUProbe(t *testing.T) {
	s := startServer(t)
	p, err := pathmtu.Probe(context.Background(), pathmtu.Options{Target: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))})
	if err != nil {
		t.Fatal(err)
	}
	if p.Verdict != result.PathOK || p.MTU == nil || *p.MTU != 65535 || p.TCPMSS == nil || p.Probes != 1 {
		t.Fatalf("got %+v (missing %v), want ok at 65535 in one probe with an MSS", p, p.Missing)
	}
	o := opts(s, result.UDPLat, 64)
	o.Duration = 100 * time.Millisecond
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}
