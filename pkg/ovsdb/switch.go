package ovsdb

import (
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
func (c Client) Switch() (Switch, error) {
	rows, err := c.sel("Open_vSwitch", all, "other_config", "external_ids", "ovs_version")
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
func (c Client) SetOtherConfig(kv map[string]string) error {
	return c.setKeys("other_config", kv)
}

// RemoveOtherConfig removes keys of Open_vSwitch other_config; a key that
// is not there is fine (`ovs-vsctl remove Open_vSwitch . other_config k`).
func (c Client) RemoveOtherConfig(keys ...string) error {
	_, err := c.transact(op{"op": "mutate", "table": "Open_vSwitch", "where": all,
		"mutations": []any{[]any{"other_config", "delete", Set(keys...)}}})
	return err
}

// SetExternalIDs sets keys of Open_vSwitch external_ids, as SetOtherConfig.
func (c Client) SetExternalIDs(kv map[string]string) error {
	return c.setKeys("external_ids", kv)
}

// setKeys replaces keys of a map column of the Open_vSwitch row: delete
// then insert in one transaction, since an OVSDB insert keeps a key that
// is already there.
func (c Client) setKeys(column string, kv map[string]string) error {
	keys := slices.Sorted(maps.Keys(kv))
	_, err := c.transact(op{"op": "mutate", "table": "Open_vSwitch", "where": all, "mutations": []any{
		[]any{column, "delete", Set(keys...)},
		[]any{column, "insert", Map(kv)},
	}})
	return err
}

// Init creates the Open_vSwitch row of a new database, as `ovs-vsctl
// init` does; on an initialised database it does nothing.
func (c Client) Init() error {
	rows, err := c.sel("Open_vSwitch", all, "_uuid")
	if err != nil || len(rows) > 0 {
		return err
	}
	_, err = c.transact(op{"op": "insert", "table": "Open_vSwitch", "row": map[string]any{}})
	return err
}
