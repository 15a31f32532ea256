package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestClientFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"client"}, "--server HOST is required"},
		{[]string{"client", "--server", "h", "--test", "tcp_lat,tcp_rr"}, `unknown test "tcp_rr"`},
		{[]string{"client", "--server", "h", "--msg-size", "1Q"}, `bad size "1Q"`},
		{[]string{"client", "--server", "h", "--test", "udp_bw", "--msg-size", "70000"}, "a UDP datagram carries at most 65507 bytes"},
		{[]string{"client", "--server", "h", "--rate", "fast"}, `bad rate "fast"`},
		{[]string{"client", "--server", "h", "--rate", "NaN"}, `--rate: bad rate "NaN"`},
		{[]string{"client", "--server", "h", "--duration", "0s"}, "--duration 0s: must be > 0"},
		{[]string{"client", "--server", "h", "--parallel", "0"}, "--parallel 0"},
		{[]string{"client", "--server", "h", "--port", "70000"}, "--port 70000"},
		{[]string{"client", "--server", "h", "--engine", "nosuch"}, `unknown engine "nosuch"`},
		{[]string{"server", "--listen", "nonsense"}, "bad --listen"},
		{[]string{"server", "--max-session", "0s"}, "--max-session"},
	} {
		var out bytes.Buffer
		err := Run(context.Background(), c.args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: want one-line error with %q, got %v", c.args, c.want, err)
		}
		var u UsageError
		if c.want != "bad --listen" && !errors.As(err, &u) {
			t.Errorf("%v: not a usage error (exit 2): %v", c.args, err)
		}
	}
}

func TestClientPlan(t *testing.T) {
	f := &clientFlags{server: "h", tests: "tcp_lat,udp_bw", sizes: "64,1K", rate: "2G", port: 7420, parallel: 2, duration: time.Second}
	p, err := f.plan()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.tests) != 2 || p.sizes[1] != 1024 || p.rate != 2e9 {
		t.Errorf("plan %+v", p)
	}
}
