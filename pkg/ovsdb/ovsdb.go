// Package ovsdb speaks to ovsdb-server over its JSON-RPC socket (RFC 7047)
// instead of running ovs-vsctl, ovn-nbctl or ovn-sbctl and parsing their
// text. DB is any database of a server — Open vSwitch's, OVN's northbound
// and southbound — with one transaction per call (Transact), reads
// (Select) and waits the server itself blocks on (WaitFor, Sync). Client is
// the typed part for the Open_vSwitch database: the Open_vSwitch row's
// other_config and external_ids, bridges and ports added, listed and
// deleted the way ovs-vsctl's add-br, add-port, del-br and del-port do, and
// a whole new switch written in one transaction (Configure). As ovs-vsctl
// without --no-wait, a Client with Wait set returns from a change only
// once ovs-vswitchd has applied it (next_cfg and cur_cfg).
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
	"time"
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
type Client struct {
	Socket string
	// Wait, when positive, makes each change return only once
	// ovs-vswitchd has applied it — its bridges, ports and interfaces
	// exist in the datapath — as ovs-vsctl does without --no-wait, for at
	// most Wait. Zero returns as soon as the database committed it
	// (--no-wait): for a switch whose ovs-vswitchd is not running (yet).
	Wait time.Duration
}

// op is one operation of a transaction, as the RFC spells it.
type op = Op

// db is the Open_vSwitch database of the client's server.
func (c Client) db() DB { return DB{Socket: c.Socket, Name: Database} }

// transact runs ops as one transaction and returns each one's result.
func (c Client) transact(ctx context.Context, ops ...op) ([]json.RawMessage, error) {
	return c.db().Transact(ctx, ops...)
}

// change runs ops, which change the switch, as one transaction and, when
// c.Wait is set, waits for ovs-vswitchd to apply them the way ovs-vsctl
// does: the same transaction raises Open_vSwitch next_cfg by one, and
// ovs-vswitchd copies the next_cfg it has configured itself from into
// cur_cfg once its datapath matches the database (the Open_vSwitch
// table's contract, vswitch.xml).
func (c Client) change(ctx context.Context, ops ...op) ([]json.RawMessage, error) {
	if c.Wait <= 0 {
		return c.transact(ctx, ops...)
	}
	n := len(ops)
	ops = append(ops,
		op{"op": "mutate", "table": "Open_vSwitch", "where": all, "mutations": []any{[]any{"next_cfg", "+=", 1}}},
		op{"op": "select", "table": "Open_vSwitch", "where": all, "columns": []string{"next_cfg"}})
	res, err := c.transact(ctx, ops...)
	if err != nil {
		return nil, err
	}
	var sel struct {
		Rows []struct {
			NextCfg int64 `json:"next_cfg"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(res[n+1], &sel); err != nil || len(sel.Rows) != 1 {
		return nil, fmt.Errorf("ovsdb: %d Open_vSwitch rows (%v), want 1", len(sel.Rows), err)
	}
	next := sel.Rows[0].NextCfg
	if err := c.db().WaitFor(ctx, Wait("Open_vSwitch", []any{Cond("cur_cfg", ">=", next)}, c.Wait)); err != nil {
		if errors.Is(err, ErrWaitTimedOut) {
			return nil, fmt.Errorf("%w: ovs-vswitchd did not apply it (cur_cfg to reach %d) within %v; is it running? its log says why", ErrNotApplied, next, c.Wait)
		}
		return nil, err
	}
	return res[:n], nil
}

// ErrNotApplied is matched by the error of a change that the database
// committed but ovs-vswitchd did not apply within Client.Wait: it is not
// running, or stuck (a DPDK that does not initialise).
var ErrNotApplied = errors.New("not applied")

// sel returns the rows of table that match where, with the given columns.
func (c Client) sel(ctx context.Context, table string, where []any, cols ...string) ([]Row, error) {
	return c.db().Select(ctx, table, where, cols...)
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
