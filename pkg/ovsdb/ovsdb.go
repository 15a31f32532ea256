// Package ovsdb speaks to ovsdb-server over its JSON-RPC socket (RFC 7047)
// instead of running ovs-vsctl, ovn-nbctl or ovn-sbctl and parsing their
// text. DB is any database of a server — Open vSwitch's, OVN's northbound
// and southbound — with one transaction per call (Transact), reads
// (Select) and waits the server itself blocks on (WaitFor, Sync). Client is
// the typed part for the Open_vSwitch database: the Open_vSwitch row's
// other_config and external_ids, bridges and ports added, listed and
// deleted the way ovs-vsctl's add-br, add-port, del-br and del-port do, and
// a whole new switch written in one transaction (Configure).
//
// Every call is one connection: a lab's handful of writes and waits does
// not need a long-lived, monitored client, and a wait is a transaction the
// server holds until its condition is true (RFC 7047 §5.2.6), so nothing
// polls.
package ovsdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Database is the schema Client addresses.
const Database = "Open_vSwitch"

// DefaultSocket is the host's ovsdb-server socket, as Debian's
// openvswitch-switch service starts it.
const DefaultSocket = "/var/run/openvswitch/db.sock"

// ErrNotRunning is matched by the error of any call when there is no
// socket: the server is not running (or not installed).
var ErrNotRunning = errors.New("Open vSwitch is not running")

// Client is one ovsdb-server's Open_vSwitch database, by its unix socket.
type Client struct{ Socket string }

// op is one operation of a transaction, as the RFC spells it.
type op = Op

// db is the Open_vSwitch database of the client's server.
func (c Client) db() DB { return DB{Socket: c.Socket, Name: Database} }

// transact runs ops as one transaction and returns each one's result.
func (c Client) transact(ops ...op) ([]json.RawMessage, error) {
	return c.db().Transact(context.Background(), ops...)
}

// sel returns the rows of table that match where, with the given columns.
func (c Client) sel(table string, where []any, cols ...string) ([]map[string]json.RawMessage, error) {
	rows, err := c.db().Select(context.Background(), table, where, cols...)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]json.RawMessage, len(rows))
	for i, r := range rows {
		out[i] = r
	}
	return out, nil
}

// all is the condition that every row matches.
var all = []any{}

// named is the condition on a table's name column.
func named(name string) []any { return []any{Cond("name", "==", name)} }

// OpError is an operation the server refused: a constraint, a missing row,
// a schema mismatch, a wait that timed out; Err and Details are its words
// (RFC 7047 §4.1.3), Index the operation's place in its transaction (-1
// for the commit itself).
type OpError struct {
	Err, Details string
	Index        int
}

func (e *OpError) Error() string {
	if e.Details == "" {
		return "ovsdb: " + e.Err
	}
	return fmt.Sprintf("ovsdb: %s: %s", e.Err, e.Details)
}
