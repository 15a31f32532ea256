// Package ovsdb reads and writes Open vSwitch's configuration database
// over ovsdb-server's JSON-RPC socket (RFC 7047), typed, instead of running
// ovs-vsctl and parsing its text. It holds only what cnibench needs: the
// Open_vSwitch row's other_config and external_ids, and bridges and ports
// added, listed and deleted the way ovs-vsctl's add-br, add-port, del-br and
// del-port do.
//
// Every call is one connection and one transaction: a handful of reads and
// writes does not need a long-lived, monitored client.
package ovsdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Database is the schema every call addresses.
const Database = "Open_vSwitch"

// DefaultSocket is the host's ovsdb-server socket, as Debian's
// openvswitch-switch service starts it.
const DefaultSocket = "/var/run/openvswitch/db.sock"

// ErrNotRunning is matched by the error of any call when there is no
// socket: Open vSwitch is not running (or not installed).
var ErrNotRunning = errors.New("Open vSwitch is not running")

// Client is one ovsdb-server, by its unix socket.
type Client struct{ Socket string }

// OpError is an operation the server refused: a constraint, a missing row,
// a schema mismatch; Err and Details are its words (RFC 7047 §4.1.3).
type OpError struct{ Err, Details string }

func (e *OpError) Error() string { return fmt.Sprintf("ovsdb: %s: %s", e.Err, e.Details) }

// op is one operation of a transaction, as the RFC spells it.
type op map[string]any

// transact runs ops as one transaction and returns each one's result.
func (c Client) transact(ops ...op) ([]json.RawMessage, error) {
	if _, err := os.Stat(c.Socket); err != nil {
		return nil, fmt.Errorf("%w (no ovsdb socket %s)", ErrNotRunning, c.Socket)
	}
	conn, err := net.DialTimeout("unix", c.Socket, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("connect ovsdb %s: %w", c.Socket, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	params := []any{Database}
	for _, o := range ops {
		params = append(params, o)
	}
	req := map[string]any{"method": "transact", "params": params, "id": 1}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, fmt.Errorf("ovsdb request: %w", err)
	}
	dec := json.NewDecoder(conn)
	for {
		var resp struct {
			ID     any               `json:"id"`
			Method string            `json:"method"`
			Result []json.RawMessage `json:"result"`
			Error  any               `json:"error"`
		}
		if err := dec.Decode(&resp); err != nil {
			return nil, fmt.Errorf("ovsdb reply: %w", err)
		}
		if resp.Method != "" {
			continue // a notification or echo meant for long-lived clients
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("ovsdb: %v", resp.Error)
		}
		for _, r := range resp.Result {
			var opErr struct {
				Error   string `json:"error"`
				Details string `json:"details"`
			}
			if json.Unmarshal(r, &opErr) == nil && opErr.Error != "" {
				return nil, &OpError{opErr.Error, opErr.Details}
			}
		}
		if len(resp.Result) < len(ops) {
			return nil, errors.New("ovsdb: empty reply")
		}
		return resp.Result, nil
	}
}

// sel returns the rows of table that match where, with the given columns.
func (c Client) sel(table string, where []any, cols ...string) ([]map[string]json.RawMessage, error) {
	res, err := c.transact(op{"op": "select", "table": table, "where": where, "columns": cols})
	if err != nil {
		return nil, err
	}
	var r struct {
		Rows []map[string]json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(res[0], &r); err != nil {
		return nil, fmt.Errorf("ovsdb select %s: %w", table, err)
	}
	return r.Rows, nil
}

// all is the condition that every row matches.
var all = []any{}

// named is the condition on a table's name column.
func named(name string) []any { return []any{[]any{"name", "==", name}} }
