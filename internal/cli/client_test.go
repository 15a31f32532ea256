package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/enginetest"
)

func TestClientFlagErrors(t *testing.T) {
	wantUsageErrors(t, []usageCase{
		{[]string{"client"}, "--server is required"},
		{[]string{"client", "--server", "10.99.0.2:5201", "--port", "7420"}, "names port 5201 but --port says 7420"},
		{[]string{"client", "--server", "10.99.0.2:x"}, "want HOST:PORT with a port 1-65535"},
		{[]string{"server", "--max-sessions", "0"}, "--max-sessions 0"},
		{[]string{"client", "--server", "h", "--test", "tcp_lat,tcp_rr"}, `unknown test "tcp_rr"`},
		{[]string{"client", "--server", "h", "--msg-size", "1Q"}, `bad size "1Q"`},
		{[]string{"client", "--server", "h", "--test", "udp_bw", "--msg-size", "70000"}, "a UDP datagram carries at most 65507 bytes"},
		{[]string{"client", "--server", "h", "--rate", "fast"}, `bad rate "fast"`},
		{[]string{"client", "--server", "h", "--rate", "NaN"}, `--rate: bad rate "NaN"`},
		{[]string{"client", "--server", "h", "--duration", "0s"}, "--duration 0s: must be > 0"},
		{[]string{"client", "--server", "h", "--parallel", "0"}, "--parallel 0"},
		{[]string{"client", "--server", "h", "--port", "70000"}, "--port 70000"},
		{[]string{"client", "--server", "h", "--engine", "nosuch"}, `unknown engine "nosuch"`},
		{[]string{"server", "--max-session", "0s"}, "--max-session"},
	})
	// A listen address the kernel refuses is the host's answer (exit 1).
	if _, err := runCLI(t, "server", "--listen", "nonsense"); err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), "bad --listen") {
		t.Errorf("server --listen nonsense: %v", err)
	}
}

// --server HOST:PORT reaches the server on that port (loopback only).
func TestClientServerHostPort(t *testing.T) {
	addr := enginetest.Server(t)
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"client", "--server", addr, "--duration", "200ms", "--warmup", "0s", "--json"}, &out, &out); err != nil {
		t.Fatalf("client --server %s: %v\n%s", addr, err, out.String())
	}
	if !strings.Contains(out.String(), `"test": "tcp_lat"`) {
		t.Errorf("no result:\n%s", out.String())
	}
}
