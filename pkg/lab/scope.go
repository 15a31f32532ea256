package lab

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cnibench/cnibench/pkg/netns"
)

// ScopeNamespaces resolves a tune --scope: "host" (or "") → nil; netns:<name>
// → that namespace; lab:<name> → the distinct namespaces of the lab's
// endpoints. Endpoints in the host's namespace are left out: lab scope
// never touches the host. Errors match ErrInvalid.
func ScopeNamespaces(scope string) ([]string, error) {
	bad := func(format string, a ...any) error { return invalidError{fmt.Errorf(format, a...)} }
	switch {
	case scope == "" || scope == "host":
		return nil, nil
	case strings.HasPrefix(scope, "netns:"):
		name := strings.TrimPrefix(scope, "netns:")
		if name == "" || !netns.Exists(name) {
			return nil, bad("--scope %s: no network namespace %q in %s (see `ip netns list`)", scope, name, netns.Dir)
		}
		return []string{name}, nil
	case !strings.HasPrefix(scope, "lab:"):
		return nil, bad("bad --scope %q: use host, lab:<name> or netns:<name>", scope)
	}
	name := strings.TrimPrefix(scope, "lab:")
	if name == "" {
		return nil, bad("--scope lab: needs a lab name (see `cnibench lab list`)")
	}
	l, err := Get(name)
	if err != nil {
		return nil, bad("--scope lab:%s: %w", name, err)
	}
	seen := map[string]bool{}
	var out []string
	for _, ep := range l.Endpoints {
		if ep.Netns != "" && !seen[ep.Netns] {
			seen[ep.Netns] = true
			out = append(out, ep.Netns)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, bad("--scope lab:%s: the lab has no endpoint in its own namespace", name)
	}
	return out, nil
}
