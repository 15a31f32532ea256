package ovsdb

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Switch is the Open_vSwitch table's one row, as far as cnibench reads it.
type Switch struct {
	OtherConfig map[string]string
	ExternalIDs map[string]string
	// Version is ovs_version, "" when the daemon did not record it.
	Version string
}

// Switch reads the Open_vSwitch row (`ovs-vsctl get Open_vSwitch .`).
func (c Client) Switch(ctx context.Context) (Switch, error) {
	rows, err := c.sel(ctx, "Open_vSwitch", all, "other_config", "external_ids", "ovs_version")
	if err != nil {
		return Switch{}, err
	}
	if len(rows) != 1 {
		return Switch{}, fmt.Errorf("ovsdb: %d Open_vSwitch rows, want 1", len(rows))
	}
	sw := Switch{Version: str(rows[0]["ovs_version"])}
	if sw.OtherConfig, err = strMap(rows[0]["other_config"]); err != nil {
		return Switch{}, err
	}
	if raw, ok := rows[0]["external_ids"]; ok {
		if sw.ExternalIDs, err = strMap(raw); err != nil {
			return Switch{}, err
		}
	}
	return sw, nil
}

// SetOtherConfig sets keys of Open_vSwitch other_config, replacing their
// values and leaving the other keys alone (`ovs-vsctl set Open_vSwitch .
// other_config:k=v`).
func (c Client) SetOtherConfig(ctx context.Context, kv map[string]string) error {
	return c.setKeys(ctx, "other_config", kv)
}

// RemoveOtherConfig removes keys of Open_vSwitch other_config; a key that
// is not there is fine (`ovs-vsctl remove Open_vSwitch . other_config k`).
func (c Client) RemoveOtherConfig(ctx context.Context, keys ...string) error {
	_, err := c.change(ctx, op{"op": "mutate", "table": "Open_vSwitch", "where": all,
		"mutations": []any{[]any{"other_config", "delete", Set(keys...)}}})
	return err
}

// SetExternalIDs sets keys of Open_vSwitch external_ids, as SetOtherConfig.
func (c Client) SetExternalIDs(ctx context.Context, kv map[string]string) error {
	return c.setKeys(ctx, "external_ids", kv)
}

// setKeys replaces keys of a map column of the Open_vSwitch row: delete
// then insert in one transaction, since an OVSDB insert keeps a key that
// is already there.
func (c Client) setKeys(ctx context.Context, column string, kv map[string]string) error {
	keys := slices.Sorted(maps.Keys(kv))
	_, err := c.change(ctx, op{"op": "mutate", "table": "Open_vSwitch", "where": all, "mutations": []any{
		[]any{column, "delete", Set(keys...)},
		[]any{column, "insert", Map(kv)},
	}})
	return err
}

// Init creates the Open_vSwitch row of a new database, as `ovs-vsctl
// init` does; on an initialised database it does nothing.
func (c Client) Init(ctx context.Context) error {
	rows, err := c.sel(ctx, "Open_vSwitch", all, "_uuid")
	if err != nil || len(rows) > 0 {
		return err
	}
	_, err = c.transact(ctx, op{"op": "insert", "table": "Open_vSwitch", "row": map[string]any{}})
	return err
}

// DPDKInitialized reads Open_vSwitch dpdk_initialized (`ovs-vsctl get
// Open_vSwitch . dpdk_initialized`): whether ovs-vswitchd's DPDK library
// initialised. A switch without DPDK, or whose vswitchd has not started
// it yet, says false.
func (c Client) DPDKInitialized(ctx context.Context) (bool, error) {
	rows, err := c.sel(ctx, "Open_vSwitch", all, "dpdk_initialized")
	if err != nil {
		return false, err
	}
	if len(rows) != 1 {
		return false, fmt.Errorf("ovsdb: %d Open_vSwitch rows, want 1", len(rows))
	}
	var v bool
	if err := json.Unmarshal(rows[0]["dpdk_initialized"], &v); err != nil {
		return false, fmt.Errorf("ovsdb: dpdk_initialized is not a boolean: %s", rows[0]["dpdk_initialized"])
	}
	return v, nil
}

// Interface is what ovs-vswitchd reports of an interface it set up.
type Interface struct {
	Name string
	// OFPort is its OpenFlow port number: -1 when ovs-vswitchd failed to
	// set it up, 0 before it tried.
	OFPort int
	// Error says why it failed ("" when it did not).
	Error string
}

// Interface reads the interface name (`ovs-vsctl get Interface name
// ofport error`); ok is false when there is none.
func (c Client) Interface(ctx context.Context, name string) (iface Interface, ok bool, err error) {
	rows, err := c.sel(ctx, "Interface", named(name), "name", "ofport", "error")
	if err != nil || len(rows) == 0 {
		return Interface{}, false, err
	}
	iface = Interface{Name: name, Error: str(rows[0]["error"])}
	// ofport is optional: unset (an empty set) until ovs-vswitchd tried.
	_ = json.Unmarshal(rows[0]["ofport"], &iface.OFPort)
	return iface, true, nil
}
