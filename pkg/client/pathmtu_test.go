package client

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/enginetest"
)

// --path-mtu probes the path to the server before the tests and puts it in
// every result, as a Kubernetes client pod's log then carries it.
func TestRunProbesThePath(t *testing.T) {
	addr := enginetest.Server(t)
	_, port, _ := net.SplitHostPort(addr)
	p, err := Flags{Server: addr, Tests: "tcp_lat,udp_lat", Sizes: "1", Engine: "builtin", Parallel: 1,
		Duration: 100 * time.Millisecond, PathMTU: true, Version: "test"}.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	set, err := Run(context.Background(), p, nil, &log)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range set.Results {
		if r.PathMTU == nil || r.PathMTU.MTU == nil || *r.PathMTU.MTU != 65535 || r.PathMTU.Target != "127.0.0.1:"+port {
			t.Fatalf("%s: path %+v", r.Test, r.PathMTU)
		}
	}
	if want := "path to 127.0.0.1:" + port + ": 65535, MSS "; !strings.Contains(log.String(), want) {
		t.Errorf("log %q lacks %q", log.String(), want)
	}
}
