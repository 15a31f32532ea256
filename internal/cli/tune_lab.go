package cli

import (
	"fmt"
	"sort"

	"github.com/cnibench/cnibench/pkg/lab"
)

// labNamespaces resolves --scope lab:<name> to the distinct namespaces of the
// lab's endpoints. Endpoints in the host's namespace (Netns "") are left out:
// lab scope never touches the host.
func labNamespaces(name string) ([]string, error) {
	if name == "" {
		return nil, UsageError{fmt.Errorf("--scope lab: needs a lab name (see `cnibench lab list`)")}
	}
	l, err := lab.Get(name)
	if err != nil {
		return nil, UsageError{fmt.Errorf("--scope lab:%s: %w", name, err)}
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
		return nil, UsageError{fmt.Errorf("--scope lab:%s: the lab has no endpoint in its own namespace", name)}
	}
	return out, nil
}
