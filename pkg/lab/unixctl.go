package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
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

// vswitchdRules is how many OpenFlow rules a vswitchd holds over all its
// bridges, hidden ones included: the "rules:" of `ovs-appctl memory/show`
// (a line of counts, cheap to ask for while a restart is waited on, unlike
// dumping every flow), through its control socket ctl.
func vswitchdRules(ctx context.Context, ctl string) (int, error) {
	out, err := unixctlCall(ctx, ctl, "memory/show")
	if err != nil {
		return 0, err
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "rules:"); ok {
			return strconv.Atoi(v)
		}
	}
	// A vswitchd whose bridges hold no rule yet leaves the count out.
	return 0, nil
}
