package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"
)

// unixctlCall runs command on an OVS or OVN daemon's control socket, as
// `ovs-appctl -t sock command args…` does (JSON-RPC 1.0 over the unix
// socket, one request and its reply), and returns the command's text.
func unixctlCall(ctx context.Context, sock, command string, args ...string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return "", fmt.Errorf("unixctl %s: %w", sock, err)
	}
	defer conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Second)
	}
	_ = conn.SetDeadline(deadline)
	if args == nil {
		args = []string{} // params must be an array, never null
	}
	if err := json.NewEncoder(conn).Encode(map[string]any{"method": command, "params": args, "id": 0}); err != nil {
		return "", fmt.Errorf("unixctl %s %s: %w", sock, command, err)
	}
	var resp struct {
		Result *string `json:"result"`
		Error  any     `json:"error"`
	}
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		return "", fmt.Errorf("unixctl %s %s: reply: %w", sock, command, err)
	}
	if resp.Error != nil || resp.Result == nil {
		return "", fmt.Errorf("unixctl %s %s: %v", sock, command, resp.Error)
	}
	return *resp.Result, nil
}

// bridgeFlows counts the flows of a bridge, hidden ones included
// (`ovs-appctl bridge/dump-flows`, one line each), through its vswitchd's
// control socket ctl.
func bridgeFlows(ctx context.Context, ctl, bridge string) (int, error) {
	out, err := unixctlCall(ctx, ctl, "bridge/dump-flows", bridge)
	if err != nil {
		return 0, err
	}
	return strings.Count(out, "\n"), nil
}
