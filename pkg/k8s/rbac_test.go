package k8s

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

// The RBAC the runner needs is kept in deploy/cnibench-rbac.yaml, for
// users who run `cnibench k8s run` on their own cluster. Every fake
// cluster of this package's tests records each API call the runner makes;
// after a full run of the tests, TestMain checks both ways that the
// manifest allows exactly those: a call it does not allow would fail on a
// real cluster, and a rule no call uses grants more than the runner needs.

// apiCall is one kind of call: verb on group/resource[/subresource].
type apiCall struct{ verb, group, resource string }

var (
	callsMu sync.Mutex
	calls   = map[apiCall]bool{}
)

// noteCall notes one call a fake clientset recorded.
func noteCall(a k8stesting.Action) {
	r := a.GetResource()
	res := r.Resource
	if s := a.GetSubresource(); s != "" {
		res += "/" + s
	}
	if r.Group == "" && res == "version" {
		return // discovery, which every authenticated user may read
	}
	// The fake names deletecollection with a dash; RBAC does not.
	verb := strings.ReplaceAll(a.GetVerb(), "-", "")
	callsMu.Lock()
	calls[apiCall{verb, r.Group, res}] = true
	callsMu.Unlock()
}

const rbacManifest = "../../deploy/cnibench-rbac.yaml"

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" {
		if err := checkRBAC(rbacManifest); err != nil {
			fmt.Fprintln(os.Stderr, "RBAC:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// checkRBAC compares the calls made with the ClusterRole in path.
func checkRBAC(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var role rbacv1.ClusterRole
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var probe struct{ Kind string }
		if yaml.Unmarshal([]byte(doc), &probe) == nil && probe.Kind == "ClusterRole" {
			if err := yaml.UnmarshalStrict([]byte(doc), &role); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	if len(role.Rules) == 0 {
		return fmt.Errorf("%s has no ClusterRole with rules; the runner calls: %s", path, strings.Join(callList(), ", "))
	}
	used := map[string]bool{}
	var denied []string
	for c := range calls {
		ok := false
		for i, r := range role.Rules {
			for _, v := range r.Verbs {
				for _, res := range r.Resources {
					if v == c.verb && res == c.resource && slices.Contains(r.APIGroups, c.group) {
						ok = true
						used[fmt.Sprintf("%d %s %s", i, v, res)] = true
					}
				}
			}
		}
		if !ok {
			denied = append(denied, fmt.Sprintf("%s %s (group %q)", c.verb, c.resource, c.group))
		}
	}
	var unused []string
	for i, r := range role.Rules {
		for _, v := range r.Verbs {
			for _, res := range r.Resources {
				if !used[fmt.Sprintf("%d %s %s", i, v, res)] {
					unused = append(unused, fmt.Sprintf("%s %s", v, res))
				}
			}
		}
	}
	sort.Strings(denied)
	sort.Strings(unused)
	switch {
	case len(denied) > 0:
		return fmt.Errorf("the runner calls what %s does not allow: %s", path, strings.Join(denied, "; "))
	case len(unused) > 0:
		return fmt.Errorf("%s allows what no call of the runner uses: %s", path, strings.Join(unused, "; "))
	}
	return nil
}

// callList is every kind of call recorded, sorted.
func callList() []string {
	callsMu.Lock()
	defer callsMu.Unlock()
	var out []string
	for c := range calls {
		out = append(out, fmt.Sprintf("%s %s/%s", c.verb, c.group, c.resource))
	}
	sort.Strings(out)
	return out
}
