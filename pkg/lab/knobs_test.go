package lab

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestKnobEntriesComplete fails for a knob entry that leaves out what the
// registry promises: its help, grammar, how it takes effect and how that
// is undone; a rule some topology passes; a knob it needs that exists.
func TestKnobEntriesComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range knobs {
		if k.name == "" || seen[k.name] {
			t.Errorf("knob %q: no name, or a name used twice", k.name)
		}
		seen[k.name] = true
		if k.help == "" || k.grammar == nil || k.apply == nil || k.undo == "" {
			t.Errorf("knob %s: help %q, grammar %v, apply %v, undo %q", k.name, k.help, k.grammar, k.apply, k.undo)
		}
		if k.rule != nil && len(k.rule.allowed()) == 0 {
			t.Errorf("knob %s: no topology takes it", k.name)
		}
		if k.needs != nil && knobIndex[k.needs.knob] == nil {
			t.Errorf("knob %s needs %q, which is no knob", k.name, k.needs.knob)
		}
		if k.apply.run == nil && slices.Contains(applyOrder, k.apply) || k.apply.run != nil && !slices.Contains(applyOrder, k.apply) {
			t.Errorf("knob %s: step %q is not run in order", k.name, k.apply.name)
		}
		if !strings.Contains(KnobList(), "  "+k.name+" ") || !strings.Contains(UpHelp(), k.helpText()) {
			t.Errorf("knob %s: not in `lab up --help`", k.name)
		}
	}
	for _, step := range applyOrder {
		used := false
		for _, k := range knobs {
			used = used || k.apply == step
		}
		if !used {
			t.Errorf("step %q applies no knob", step.name)
		}
	}
}

// Each topology refusal names the knob and where it is taken, one line,
// generated from the rule over the rows — and the topologies named are
// exactly those a Resolve accepts.
func TestKnobRefusalsFromRows(t *testing.T) {
	for _, k := range knobs {
		if k.rule == nil {
			continue
		}
		allowed := k.rule.allowed()
		for _, row := range topologies {
			s := row.defaults()
			err := s.setKnob(k.name, knobValueFor(k))
			takes := k.rule.takes(row)
			if takes && err != nil {
				t.Errorf("%s on %s: %v", k.name, row.name, err)
			}
			if !takes {
				if err == nil {
					t.Errorf("%s on %s: accepted", k.name, row.name)
					continue
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "knob "+k.name+": ") || !strings.Contains(msg, row.name) || !strings.Contains(msg, allowed[0]) || strings.Contains(msg, "\n") {
					t.Errorf("%s on %s: %q does not name the knob, the topology and where it is taken", k.name, row.name, msg)
				}
			}
		}
	}
}

// knobValueFor is a value the knob's grammar accepts that does not turn it
// off.
func knobValueFor(k *knob) string {
	switch g := k.grammar.(type) {
	case intRange:
		return strconv.FormatInt(max(g.lo, 1), 10)
	case onOff:
		return "on"
	}
	return map[string]string{"offloads": "gro=off", "notrack": "10.0.0.0/8", "pmd_cpus": "0", "fastpath": "ebpf",
		"proxy": "iptables", "policy_mode": "set", "tunnel": "vxlan", "skip_conntrack": "10.16.0.0/16"}[k.name]
}
