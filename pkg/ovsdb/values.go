package ovsdb

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// OVSDB's JSON notation (RFC 7047 §5.1): a map is ["map", [[k, v], ...]], a
// set ["set", [...]] or, with one element, the element alone; a row
// reference ["uuid", "…"], or ["named-uuid", "…"] for a row inserted by the
// same transaction.

// Map is kv in OVSDB notation, keys sorted so a request is the same for
// the same map.
func Map(kv map[string]string) []any {
	pairs := []any{}
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		pairs = append(pairs, []any{k, kv[k]})
	}
	return []any{"map", pairs}
}

// Set is a set of atoms in OVSDB notation.
func Set[T any](atoms ...T) []any {
	s := []any{}
	for _, a := range atoms {
		s = append(s, a)
	}
	return []any{"set", s}
}

// UUID refers to the row whose _uuid is id.
func UUID(id string) []any { return []any{"uuid", id} }

// NamedUUID refers to the row an insert of the same transaction names
// ("uuid-name").
func NamedUUID(name string) []any { return []any{"named-uuid", name} }

// strMap decodes an OVSDB map of strings.
func strMap(raw json.RawMessage) (map[string]string, error) {
	var v []json.RawMessage
	if err := json.Unmarshal(raw, &v); err != nil || len(v) != 2 {
		return nil, fmt.Errorf("ovsdb: not a map: %s", raw)
	}
	var pairs [][2]string
	if err := json.Unmarshal(v[1], &pairs); err != nil {
		return nil, fmt.Errorf("ovsdb: map pairs: %w", err)
	}
	m := map[string]string{}
	for _, p := range pairs {
		m[p[0]] = p[1]
	}
	return m, nil
}

// uuids decodes a set of row references: one ["uuid", id] or a set of them.
func uuids(raw json.RawMessage) ([]string, error) {
	var v []json.RawMessage
	var tag string
	if err := json.Unmarshal(raw, &v); err != nil || len(v) != 2 || json.Unmarshal(v[0], &tag) != nil {
		return nil, fmt.Errorf("ovsdb: not a set of uuids: %s", raw)
	}
	if tag == "uuid" {
		var id string
		if err := json.Unmarshal(v[1], &id); err != nil {
			return nil, fmt.Errorf("ovsdb: not a uuid: %s", raw)
		}
		return []string{id}, nil
	}
	var refs [][2]string
	if tag != "set" || json.Unmarshal(v[1], &refs) != nil {
		return nil, fmt.Errorf("ovsdb: not a set of uuids: %s", raw)
	}
	ids := make([]string, 0, len(refs))
	for _, r := range refs {
		ids = append(ids, r[1])
	}
	return ids, nil
}

// str decodes a string column; an optional one that is unset (an empty
// set) is "".
func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s) // an empty set is not a string: unset
	return s
}
