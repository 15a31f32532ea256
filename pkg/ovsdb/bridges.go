package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrNoBridge is matched by AddPort's error when its bridge does not exist.
var ErrNoBridge = errors.New("no such bridge")

// ErrInitialized is matched by Configure's error on a database that
// already has its Open_vSwitch row.
var ErrInitialized = errors.New("database already initialized")

// ErrNotInitialized is matched by AddBridges' error on a database without
// its Open_vSwitch row: Init (ovs-vsctl init) was not run.
var ErrNotInitialized = errors.New("database not initialized")

// Bridge is one row of the Bridge table.
type Bridge struct {
	Name string
	// DatapathType is "netdev" for the userspace datapath; "" (or
	// "system") is the kernel's.
	DatapathType string
}

// Port is a port with its one interface, as add-port makes it.
type Port struct {
	Name string
	// Type is the interface's: "" a network device of this namespace,
	// "internal", "geneve", "dpdk", …
	Type string
	// Options are the interface's options (remote_ip, key, dpdk-devargs).
	Options map[string]string
	// MTURequest, when positive, asks for the interface's MTU.
	MTURequest int
	// ExternalIDs are the interface's (iface-id: the OVN logical port an
	// ovn-controller binds it to).
	ExternalIDs map[string]string
}

// Bridges lists the bridges by name (`ovs-vsctl list-br`, with each
// bridge's datapath type).
func (c Client) Bridges(ctx context.Context) ([]Bridge, error) {
	rows, err := c.sel(ctx, "Bridge", all, "name", "datapath_type")
	if err != nil {
		return nil, err
	}
	out := make([]Bridge, 0, len(rows))
	for _, r := range rows {
		out = append(out, Bridge{Name: str(r["name"]), DatapathType: str(r["datapath_type"])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Ports lists the names of every bridge's ports (`ovs-vsctl --columns=name
// find Port`), sorted; a bridge's own internal port is one of them.
func (c Client) Ports(ctx context.Context) ([]string, error) {
	rows, err := c.sel(ctx, "Port", all, "name")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		names = append(names, str(r["name"]))
	}
	sort.Strings(names)
	return names, nil
}

// AddBridges creates the bridges, each with its internal port of the same
// name and its Ports, in one transaction, as one `ovs-vsctl add-br br --
// set bridge br datapath_type=… -- add-port br p -- set interface p
// type=… options:…=… …` does; with c.Wait, it returns once ovs-vswitchd
// has created them. A bridge or port of a name already there is an error
// (the tables' name indexes), and nothing is added.
func (c Client) AddBridges(ctx context.Context, brs ...BridgeConfig) error {
	// An uninitialised database has no row to hang the bridges on: the
	// inserts would be garbage-collected at commit, without an error.
	ops := []op{{"op": "wait", "timeout": 0, "table": "Open_vSwitch", "where": all, "columns": []string{"_uuid"},
		"until": "!=", "rows": []any{}}}
	var refs []any
	for i, br := range brs {
		brOps, ref := br.insert(fmt.Sprintf("br%d", i))
		ops = append(ops, brOps...)
		refs = append(refs, ref)
	}
	ops = append(ops, op{"op": "mutate", "table": "Open_vSwitch", "where": all,
		"mutations": []any{[]any{"bridges", "insert", Set(refs...)}}})
	_, err := c.change(ctx, ops...)
	if waitFailed(err) {
		err = ErrNotInitialized
	}
	if err != nil {
		return fmt.Errorf("add bridge %s: %w", bridgeNames(brs), err)
	}
	return nil
}

// bridgeNames is the bridges' names, for an error.
func bridgeNames(brs []BridgeConfig) string {
	names := make([]string, len(brs))
	for i, br := range brs {
		names[i] = br.Name
	}
	return strings.Join(names, ", ")
}

// DelBridge deletes the bridge name and its ports (`ovs-vsctl --if-exists
// del-br name`); a bridge that is not there is fine (and, as ovs-vsctl
// with nothing to change, not waited for).
func (c Client) DelBridge(ctx context.Context, name string) error {
	id, err := c.uuidOf(ctx, "Bridge", name)
	if err != nil || id == "" {
		return err
	}
	// Ports and interfaces are not root rows: the server deletes them with
	// the last reference to them.
	_, err = c.change(ctx, op{"op": "mutate", "table": "Open_vSwitch", "where": all,
		"mutations": []any{[]any{"bridges", "delete", Set(UUID(id))}}})
	if err != nil {
		return fmt.Errorf("delete bridge %s: %w", name, err)
	}
	return nil
}

// AddPort adds p to bridge in one transaction (`ovs-vsctl add-port bridge
// name -- set interface name type=… options:…=… mtu_request=…`).
func (c Client) AddPort(ctx context.Context, bridge string, p Port) error {
	ops := []op{
		// Without its bridge the port would be garbage-collected silently.
		{"op": "wait", "timeout": 0, "table": "Bridge", "where": named(bridge), "columns": []string{"name"},
			"until": "==", "rows": []any{map[string]any{"name": bridge}}},
	}
	ops = append(ops, p.insert("port")...)
	ops = append(ops, op{"op": "mutate", "table": "Bridge", "where": named(bridge),
		"mutations": []any{[]any{"ports", "insert", Set(NamedUUID("port"))}}})
	_, err := c.change(ctx, ops...)
	if waitFailed(err) {
		err = fmt.Errorf("%w %s", ErrNoBridge, bridge)
	}
	if err != nil {
		return fmt.Errorf("add port %s: %w", p.Name, err)
	}
	return nil
}

// DelPort deletes the port name from whichever bridge holds it
// (`ovs-vsctl --if-exists del-port name`); a port that is not there is
// fine.
func (c Client) DelPort(ctx context.Context, name string) error {
	id, err := c.uuidOf(ctx, "Port", name)
	if err != nil || id == "" {
		return err
	}
	_, err = c.change(ctx, op{"op": "mutate", "table": "Bridge", "where": []any{[]any{"ports", "includes", UUID(id)}},
		"mutations": []any{[]any{"ports", "delete", Set(UUID(id))}}})
	if err != nil {
		return fmt.Errorf("delete port %s: %w", name, err)
	}
	return nil
}

// uuidOf finds the row of table whose name is name; "" when there is none.
func (c Client) uuidOf(ctx context.Context, table, name string) (string, error) {
	rows, err := c.sel(ctx, table, named(name), "_uuid")
	if err != nil || len(rows) == 0 {
		return "", err
	}
	ids, err := uuids(rows[0]["_uuid"])
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// waitFailed says err is a transaction's "wait" operation that found its
// rows otherwise than required: the server answers "timed out" (RFC 7047
// §5.2.6, with a timeout of 0).
func waitFailed(err error) bool {
	var oe *OpError
	return errors.As(err, &oe) && oe.Err == "timed out"
}

// insert is the port's Interface and Port rows, the Port named uuidName
// for the rest of the transaction.
func (p Port) insert(uuidName string) []op {
	iface := map[string]any{"name": p.Name}
	if p.Type != "" {
		iface["type"] = p.Type
	}
	if len(p.Options) > 0 {
		iface["options"] = Map(p.Options)
	}
	if p.MTURequest > 0 {
		iface["mtu_request"] = p.MTURequest
	}
	if len(p.ExternalIDs) > 0 {
		iface["external_ids"] = Map(p.ExternalIDs)
	}
	return []op{
		{"op": "insert", "table": "Interface", "uuid-name": uuidName + "_if", "row": iface},
		{"op": "insert", "table": "Port", "uuid-name": uuidName, "row": map[string]any{"name": p.Name, "interfaces": NamedUUID(uuidName + "_if")}},
	}
}

// insert is the bridge's rows — its ports' Interface and Port rows, its
// own internal port's first, then the Bridge — named uuidName for the rest
// of the transaction, and the reference to it.
func (br BridgeConfig) insert(uuidName string) ([]op, any) {
	var ops []op
	var portRefs []any
	internal := Port{Name: br.Name, Type: "internal"}
	for j, p := range append([]Port{internal}, br.Ports...) {
		pn := fmt.Sprintf("%s_p%d", uuidName, j)
		ops = append(ops, p.insert(pn)...)
		portRefs = append(portRefs, NamedUUID(pn))
	}
	row := map[string]any{"name": br.Name, "ports": Set(portRefs...)}
	if br.DatapathType != "" {
		row["datapath_type"] = br.DatapathType
	}
	if br.FailMode != "" {
		row["fail_mode"] = br.FailMode
	}
	if len(br.OtherConfig) > 0 {
		row["other_config"] = Map(br.OtherConfig)
	}
	ops = append(ops, op{"op": "insert", "table": "Bridge", "uuid-name": uuidName, "row": row})
	return ops, NamedUUID(uuidName)
}

// Config is a whole switch: the Open_vSwitch row's maps and every bridge
// with its ports.
type Config struct {
	ExternalIDs map[string]string
	OtherConfig map[string]string
	Bridges     []BridgeConfig
}

// BridgeConfig is one bridge of a Config, with its internal port of the
// same name (as add-br makes it) and Ports.
type BridgeConfig struct {
	Name string
	// DatapathType is "netdev" for the userspace datapath, "" the kernel's.
	DatapathType string
	// FailMode is "secure" for a bridge only its controller programs
	// (OVN's integration bridge), "" OVS's default (standalone).
	FailMode    string
	OtherConfig map[string]string
	Ports       []Port
}

// Configure writes cfg into a new database in one transaction, as one
// `ovs-vsctl --no-wait init -- set Open_vSwitch . … -- add-br … -- add-port
// …` would: written before ovs-vswitchd starts, the daemon builds every
// bridge and port in its first pass instead of reconfiguring once per
// change. A database that already has its Open_vSwitch row is refused
// (ErrInitialized): this is for a switch that does not exist yet.
func (c Client) Configure(ctx context.Context, cfg Config) error {
	var ops []op
	// The table holds at most one row: on an initialised database the
	// insert below fails, and this wait says why first.
	ops = append(ops, op{"op": "wait", "timeout": 0, "table": "Open_vSwitch", "where": all, "columns": []string{"_uuid"},
		"until": "==", "rows": []any{}})
	var brRefs []any
	for i, br := range cfg.Bridges {
		brOps, ref := br.insert(fmt.Sprintf("br%d", i))
		ops = append(ops, brOps...)
		brRefs = append(brRefs, ref)
	}
	sw := map[string]any{"bridges": Set(brRefs...)}
	if len(cfg.ExternalIDs) > 0 {
		sw["external_ids"] = Map(cfg.ExternalIDs)
	}
	if len(cfg.OtherConfig) > 0 {
		sw["other_config"] = Map(cfg.OtherConfig)
	}
	ops = append(ops, op{"op": "insert", "table": "Open_vSwitch", "row": sw})
	// Never waited for: no ovs-vswitchd serves a database this new.
	_, err := c.transact(ctx, ops...)
	if waitFailed(err) {
		err = ErrInitialized
	}
	if err != nil {
		return fmt.Errorf("configure switch: %w", err)
	}
	return nil
}
