package stages

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cnibench/cnibench/pkg/profile"
)

// The userspace datapath's own code by function: pkg/profile resolves the
// user-space samples of ovs-vswitchd (profile.UserSymbolized) to the
// function they were taken in, as a frame after "[user]" — or says there
// why it could not (a stripped binary) —, and its user stage
// (user:ovs-vswitchd: flow lookup, conntrack, tunnel push/pop, upcalls,
// whatever the binary names) is split by those frames here.

// UserFunction is one function's share of a process's user-space samples.
type UserFunction struct {
	// Function is "NAME@MODULE", or "?@MODULE stripped" for the samples
	// in a module without a symbol table, "?@MODULE" for an address no
	// symbol covers, "?" for code in no file.
	Function string  `json:"function"`
	Samples  uint64  `json:"samples"`
	Pct      float64 `json:"pct"` // of the process's user-space samples
}

// UserCode is one process's user-space time by function in two arms.
type UserCode struct {
	Process string         `json:"process"`
	A       []UserFunction `json:"a"`
	B       []UserFunction `json:"b"`
}

// UserFunctions splits comm's user-space samples (its user stage) by the
// function frame that follows "[user]", largest first; nil when none of
// its samples carries one.
func UserFunctions(stacks map[string]uint64, comm string) []UserFunction {
	by := map[string]uint64{}
	var total uint64
	prefix := comm + ";" + profile.UserFrame + ";" + profile.UserFramePrefix
	for st, n := range stacks {
		rest, ok := strings.CutPrefix(st, prefix)
		if !ok || strings.Contains(rest, ";") {
			continue // another process, or a sample that went on into the kernel
		}
		by[strings.TrimSuffix(rest, "]")] += n
		total += n
	}
	if total == 0 {
		return nil
	}
	out := make([]UserFunction, 0, len(by))
	for _, f := range slices.Sorted(maps.Keys(by)) {
		out = append(out, UserFunction{Function: f, Samples: by[f], Pct: 100 * float64(by[f]) / float64(total)})
	}
	slices.SortStableFunc(out, func(a, b UserFunction) int { return cmp.Compare(b.Samples, a.Samples) })
	return out
}

// userCode is UserFunctions of every resolved process in either cell.
func userCode(a, b *Cell) []UserCode {
	var out []UserCode
	for _, comm := range slices.Sorted(maps.Keys(profile.UserSymbolized)) {
		fa, fb := UserFunctions(a.Stacks, comm), UserFunctions(b.Stacks, comm)
		if len(fa)+len(fb) > 0 {
			out = append(out, UserCode{Process: comm, A: fa, B: fb})
		}
	}
	return out
}

// userFunctionsText is the largest functions' shares, a line: the rest
// summed, and what could not be named said as such.
func userFunctionsText(fs []UserFunction) string {
	if len(fs) == 0 {
		return "no sample"
	}
	var parts []string
	var rest float64
	for i, f := range fs {
		if i >= 6 {
			rest += f.Pct
			continue
		}
		name := f.Function
		if m, ok := strings.CutPrefix(name, "?@"); ok {
			name = "unresolved in " + m
			if mod, ok := strings.CutSuffix(m, " stripped"); ok {
				name = "unresolved: " + mod + " is stripped (no symbol table)"
			}
		}
		parts = append(parts, fmt.Sprintf("%.0f%% %s", f.Pct, name))
	}
	if rest > 0 {
		parts = append(parts, fmt.Sprintf("%.0f%% in %d more", rest, len(fs)-6))
	}
	return strings.Join(parts, ", ")
}
