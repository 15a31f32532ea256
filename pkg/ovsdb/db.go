package ovsdb

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// DB is one database of an ovsdb-server, by the server's unix socket and
// the database's name ("Open_vSwitch", "OVN_Northbound", "OVN_Southbound").
type DB struct {
	Socket string
	Name   string
}

// Op is one operation of a transaction (RFC 7047 §5.2): {"op": "insert",
// "table": …, "row": …} and the others, with values in OVSDB's notation
// (Set, Map, NamedUUID).
type Op map[string]any

// Row is one row a select returned, column by column, undecoded; String,
// Map and UUIDs read its columns.
type Row map[string]json.RawMessage

// defaultTimeout bounds a call whose context has no deadline: a server that
// accepted the connection answers a transaction in milliseconds.
const defaultTimeout = 10 * time.Second

// Transact runs ops as one transaction and returns each one's result. An
// operation the server refused is an *OpError naming it; the transaction
// then changed nothing. The call ends at ctx's deadline (or after
// defaultTimeout when it has none) or when ctx is cancelled.
func (d DB) Transact(ctx context.Context, ops ...Op) ([]json.RawMessage, error) {
	if _, err := os.Stat(d.Socket); err != nil {
		return nil, fmt.Errorf("%w (no ovsdb socket %s)", ErrNotRunning, d.Socket)
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", d.Socket)
	if err != nil {
		return nil, fmt.Errorf("connect ovsdb %s: %w", d.Socket, err)
	}
	defer conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(defaultTimeout)
	}
	_ = conn.SetDeadline(deadline)
	// A cancelled context ends a wait the server is still holding.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()

	params := []any{d.Name}
	for _, o := range ops {
		params = append(params, o)
	}
	enc := json.NewEncoder(conn)
	if err := enc.Encode(map[string]any{"method": "transact", "params": params, "id": 1}); err != nil {
		return nil, d.callErr(ctx, "request", err)
	}
	dec := json.NewDecoder(bufio.NewReaderSize(conn, 64<<10))
	for {
		var resp struct {
			ID     json.RawMessage   `json:"id"`
			Method string            `json:"method"`
			Params json.RawMessage   `json:"params"`
			Result []json.RawMessage `json:"result"`
			Error  any               `json:"error"`
		}
		if err := dec.Decode(&resp); err != nil {
			return nil, d.callErr(ctx, "reply", err)
		}
		if resp.Method == "echo" {
			// The server's inactivity probe (a long wait can meet one):
			// unanswered, it closes the connection.
			if err := enc.Encode(map[string]any{"id": resp.ID, "result": resp.Params, "error": nil}); err != nil {
				return nil, d.callErr(ctx, "echo", err)
			}
			continue
		}
		if resp.Method != "" {
			continue // a notification meant for monitoring clients
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("ovsdb %s: %v", d.Name, resp.Error)
		}
		for i, r := range resp.Result {
			var opErr struct {
				Error   string `json:"error"`
				Details string `json:"details"`
			}
			if json.Unmarshal(r, &opErr) == nil && opErr.Error != "" {
				if i >= len(ops) {
					i = -1
				}
				return nil, &OpError{Err: opErr.Error, Details: opErr.Details, Index: i}
			}
		}
		if len(resp.Result) < len(ops) {
			return nil, errors.New("ovsdb: empty reply")
		}
		return resp.Result, nil
	}
}

// callErr is a broken call's error: the context's when it ended the call.
func (d DB) callErr(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("ovsdb %s %s: %w", d.Name, what, cerr)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("ovsdb %s %s: %w", d.Name, what, context.DeadlineExceeded)
	}
	return fmt.Errorf("ovsdb %s %s: %w", d.Name, what, err)
}

// Select returns the rows of table that match where, with the given
// columns (all of them when none is given).
func (d DB) Select(ctx context.Context, table string, where []any, cols ...string) ([]Row, error) {
	o := Op{"op": "select", "table": table, "where": where}
	if len(cols) > 0 {
		o["columns"] = cols
	}
	res, err := d.Transact(ctx, o)
	if err != nil {
		return nil, err
	}
	var r struct {
		Rows []Row `json:"rows"`
	}
	if err := json.Unmarshal(res[0], &r); err != nil {
		return nil, fmt.Errorf("ovsdb select %s: %w", table, err)
	}
	return r.Rows, nil
}

// Cond is one condition of a where clause: column, function ("==", "!=",
// "<", "<=", ">", ">=", "includes", "excludes") and a value in OVSDB's
// notation.
func Cond(column, function string, value any) []any { return []any{column, function, value} }

// Wait is an operation that holds its transaction until at least one row
// of table matches where, for at most timeout (RFC 7047 §5.2.6 with
// "until": "!=" and no rows): several in one transaction hold it until all
// are true, and ovsdb-server re-checks them whenever the database changes.
func Wait(table string, where []any, timeout time.Duration) Op {
	return Op{"op": "wait", "timeout": timeout.Milliseconds(), "table": table, "where": where,
		"columns": []string{"_uuid"}, "until": "!=", "rows": []any{}}
}

// ErrWaitTimedOut is matched by WaitFor's error when its time ran out
// before the condition held.
var ErrWaitTimedOut = errors.New("timed out")

// WaitFor runs the waits as one transaction: it returns once every one of
// them holds, or ErrWaitTimedOut when the first of their timeouts passes.
func (d DB) WaitFor(ctx context.Context, waits ...Op) error {
	var longest time.Duration
	for _, w := range waits {
		if ms, ok := w["timeout"].(int64); ok {
			longest = max(longest, time.Duration(ms)*time.Millisecond)
		}
	}
	// The connection must outlive the server's own timeout, or the reply
	// saying which wait timed out is lost.
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		cctx, cancel = context.WithTimeout(ctx, longest+defaultTimeout)
	}
	defer cancel()
	_, err := d.Transact(cctx, waits...)
	if waitFailed(err) {
		return fmt.Errorf("%w waiting in %s", ErrWaitTimedOut, d.Name)
	}
	return err
}

// Sync is `ovn-nbctl --wait=sb|hv sync` on a northbound database: it
// raises NB_Global's nb_cfg by one and waits until NB_Global's column
// (sb_cfg: ovn-northd has compiled everything before it into the
// southbound database; hv_cfg: every chassis's ovn-controller has also
// put it into its switch) reaches that value.
func (d DB) Sync(ctx context.Context, column string, timeout time.Duration) error {
	res, err := d.Transact(ctx,
		Op{"op": "mutate", "table": "NB_Global", "where": all, "mutations": []any{[]any{"nb_cfg", "+=", 1}}},
		Op{"op": "select", "table": "NB_Global", "where": all, "columns": []string{"nb_cfg"}})
	if err != nil {
		return fmt.Errorf("sync: raise nb_cfg: %w", err)
	}
	var sel struct {
		Rows []struct {
			NbCfg int64 `json:"nb_cfg"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(res[1], &sel); err != nil || len(sel.Rows) != 1 {
		return fmt.Errorf("sync: %d NB_Global rows (%v), want 1", len(sel.Rows), err)
	}
	if err := d.WaitFor(ctx, Wait("NB_Global", []any{Cond(column, ">=", sel.Rows[0].NbCfg)}, timeout)); err != nil {
		return fmt.Errorf("sync: %s to reach nb_cfg %d: %w", column, sel.Rows[0].NbCfg, err)
	}
	return nil
}

// String reads a string column; an optional one that is unset is "".
func (r Row) String(col string) string { return str(r[col]) }

// Map reads a map column of strings; an absent column is an empty map.
func (r Row) Map(col string) (map[string]string, error) {
	raw, ok := r[col]
	if !ok {
		return map[string]string{}, nil
	}
	return strMap(raw)
}

// UUIDs reads a column of row references (one, or a set of them).
func (r Row) UUIDs(col string) ([]string, error) { return uuids(r[col]) }

// Strings reads a set of strings (one string alone, or ["set", […]]).
func (r Row) Strings(col string) ([]string, error) {
	raw := r[col]
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var v []json.RawMessage
	var tag string
	if err := json.Unmarshal(raw, &v); err != nil || len(v) != 2 || json.Unmarshal(v[0], &tag) != nil || tag != "set" {
		return nil, fmt.Errorf("ovsdb: column %s is not a set of strings: %s", col, raw)
	}
	var out []string
	if err := json.Unmarshal(v[1], &out); err != nil {
		return nil, fmt.Errorf("ovsdb: column %s is not a set of strings: %s", col, raw)
	}
	return out, nil
}
