package tune

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"time"
)

// Open vSwitch knobs, read and written in the OVSDB Open_vSwitch table over
// ovsdb-server's JSON-RPC socket (RFC 7047), not by parsing ovs-vsctl text.

func init() {
	register(
		ovsDatapathKnob(),
		ovsOtherConfig("pmd-cpu-mask", "PMD threads pinned to CPUs (userspace datapath)", "", nil, true,
			"set other_config:pmd-cpu-mask to isolated CPUs yourself: cnibench cannot know which CPUs are free (003)"),
		ovsOtherConfig("pmd-sleep-max", "PMD load-based sleeping, max µs", "0",
			map[Profile]Rec{Latency: {"0", srcDPDK + " (sleeping increases wakeup latency)"}}, false, ""),
		ovsOtherConfig("userspace-tso-enable", "TCP segmentation offload in the userspace datapath", "false",
			map[Profile]Rec{Throughput: {"true", srcDPDK}}, false, ""),
		ovsOtherConfig("userspace-sock-buf-size", "Socket buffer of OVS system interfaces (userspace datapath)", "212992",
			map[Profile]Rec{Throughput: {"1073741823", srcOVSUDP}}, false, ""),
	)
}

// ovsdb is a minimal OVSDB JSON-RPC client: one connection per call is
// plenty for a handful of reads and writes.
func ovsdbTransact(sock string, ops ...any) ([]json.RawMessage, error) {
	if _, err := os.Stat(sock); err != nil {
		return nil, fmt.Errorf("Open vSwitch is not running (no ovsdb socket %s)", sock)
	}
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("connect ovsdb %s: %w", sock, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	req := map[string]any{"method": "transact", "params": append([]any{"Open_vSwitch"}, ops...), "id": 1}
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, fmt.Errorf("ovsdb request: %w", err)
	}
	dec := json.NewDecoder(c)
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
				return nil, fmt.Errorf("ovsdb: %s: %s", opErr.Error, opErr.Details)
			}
		}
		return resp.Result, nil
	}
}

// ovsdbSelect returns the rows of table with the given columns.
func ovsdbSelect(sock, table string, cols ...string) ([]map[string]json.RawMessage, error) {
	res, err := ovsdbTransact(sock, map[string]any{"op": "select", "table": table, "where": []any{}, "columns": cols})
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, errors.New("ovsdb: empty reply")
	}
	var r struct {
		Rows []map[string]json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(res[0], &r); err != nil {
		return nil, fmt.Errorf("ovsdb select %s: %w", table, err)
	}
	return r.Rows, nil
}

// ovsMap decodes an OVSDB map value ["map", [[k, v], ...]].
func ovsMap(raw json.RawMessage) (map[string]string, error) {
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

// ovsOtherConfigGet reads Open_vSwitch.other_config and ovs_version (""
// when the daemon did not record it).
func ovsOtherConfigGet(sock string) (map[string]string, string, error) {
	rows, err := ovsdbSelect(sock, "Open_vSwitch", "other_config", "ovs_version")
	if err != nil {
		return nil, "", err
	}
	if len(rows) != 1 {
		return nil, "", fmt.Errorf("ovsdb: %d Open_vSwitch rows, want 1", len(rows))
	}
	var version string
	_ = json.Unmarshal(rows[0]["ovs_version"], &version) // an empty set when unset
	m, err := ovsMap(rows[0]["other_config"])
	return m, version, err
}

// ovsKeyFor is the other_config key the running OVS reads for key: OVS 3.1
// (Debian 12's) calls load-based sleeping's ceiling pmd-maxsleep, 3.2
// renamed it pmd-sleep-max. Writing the new name into a 3.1 switch would be
// silently ignored. An unknown version gets the current name.
func ovsKeyFor(key, version string) string {
	if key != "pmd-sleep-max" {
		return key
	}
	var major, minor int
	if n, _ := fmt.Sscanf(version, "%d.%d", &major, &minor); n == 2 && (major < 3 || major == 3 && minor < 2) {
		return "pmd-maxsleep"
	}
	return key
}

// ovsOtherConfigSet replaces one key (delete then insert, one transaction);
// absent removes it.
func ovsOtherConfigSet(sock, key, value string, absent bool) error {
	muts := []any{[]any{"other_config", "delete", []any{"set", []any{key}}}}
	if !absent {
		muts = append(muts, []any{"other_config", "insert", []any{"map", []any{[]any{key, value}}}})
	}
	_, err := ovsdbTransact(sock, map[string]any{"op": "mutate", "table": "Open_vSwitch", "where": []any{}, "mutations": muts})
	return err
}

func ovsOtherConfig(key, title, dflt string, recs map[Profile]Rec, auditOnly bool, why string) *Knob {
	risk := "affects the userspace (netdev) datapath only"
	if key == "userspace-sock-buf-size" {
		risk = "takes effect only after ovs-vswitchd restarts (002); needs rmem_max/wmem_max raised too"
	}
	return &Knob{
		ID: "ovs." + key, Title: title, Family: "ovs", Scope: ScopeOVS, Risk: risk, Recs: recs,
		AuditOnly: auditOnly, Why: why, Source: srcDPDK,
		Access: "OVSDB Open_vSwitch . other_config:" + key + access(key) + " (JSON-RPC on the ovsdb socket)",
		Read: func(e *Env) ([]Current, error) {
			m, version, err := ovsOtherConfigGet(e.OVSDB)
			if err != nil {
				return nil, err
			}
			v, ok := m[ovsKeyFor(key, version)]
			if !ok {
				disp := "(unset)"
				if dflt != "" {
					disp = "(unset: " + dflt + ")"
				}
				return []Current{{Value: disp, Absent: true, hint: dflt}}, nil
			}
			return []Current{{Value: v, Raw: v, hint: v}}, nil
		},
		Judge: func(_ *Env, c Current, rec string) (Status, string, string) {
			if c.hint == rec {
				return StatusOK, "", ""
			}
			return StatusDiffers, rec, ""
		},
		Write: func(e *Env, _ string, v string, absent bool) error {
			_, version, err := ovsOtherConfigGet(e.OVSDB)
			if err != nil {
				return err
			}
			return ovsOtherConfigSet(e.OVSDB, ovsKeyFor(key, version), v, absent)
		},
	}
}

// access names the older key a knob falls back to, for the knob's doc.
func access(key string) string {
	if k := ovsKeyFor(key, "3.1"); k != key {
		return " (" + k + " before OVS 3.2)"
	}
	return ""
}

func ovsDatapathKnob() *Knob {
	return &Knob{
		ID: "ovs.datapath_type", Title: "Datapath type of each OVS bridge (system = kernel, netdev = userspace)",
		Family: "ovs", Scope: ScopeOVS, Access: "OVSDB Bridge.name, Bridge.datapath_type",
		Risk: "none (read only)", AuditOnly: true, Source: srcDPDK,
		Why: "chosen per bridge when it is created; compare both with the lab presets",
		Read: func(e *Env) ([]Current, error) {
			rows, err := ovsdbSelect(e.OVSDB, "Bridge", "name", "datapath_type")
			if err != nil {
				return nil, err
			}
			var out []Current
			for _, r := range rows {
				var name, dp string
				_ = json.Unmarshal(r["name"], &name)
				if json.Unmarshal(r["datapath_type"], &dp) != nil || dp == "" {
					dp = "system"
				}
				out = append(out, Current{Target: name, Value: dp, Raw: dp})
			}
			sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
			if len(out) == 0 {
				return []Current{{Value: "no bridges"}}, nil
			}
			return out, nil
		},
	}
}
