package tune

import (
	"context"
	"fmt"

	"github.com/cnibench/cnibench/pkg/ovsdb"
)

// Open vSwitch knobs, read and written in the OVSDB Open_vSwitch table over
// ovsdb-server's JSON-RPC socket (RFC 7047, through pkg/ovsdb), not by
// parsing ovs-vsctl text.

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
			sw, err := ovsdb.Client{Socket: e.OVSDB}.Switch(context.Background())
			if err != nil {
				return nil, err
			}
			v, ok := sw.OtherConfig[ovsKeyFor(key, sw.Version)]
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
			c := ovsdb.Client{Socket: e.OVSDB}
			sw, err := c.Switch(context.Background())
			if err != nil {
				return err
			}
			k := ovsKeyFor(key, sw.Version)
			if absent {
				return c.RemoveOtherConfig(context.Background(), k)
			}
			return c.SetOtherConfig(context.Background(), map[string]string{k: v})
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
			brs, err := ovsdb.Client{Socket: e.OVSDB}.Bridges(context.Background())
			if err != nil {
				return nil, err
			}
			var out []Current
			for _, b := range brs { // by name
				dp := b.DatapathType
				if dp == "" {
					dp = "system"
				}
				out = append(out, Current{Target: b.Name, Value: dp, Raw: dp})
			}
			if len(out) == 0 {
				return []Current{{Value: "no bridges"}}, nil
			}
			return out, nil
		},
	}
}
