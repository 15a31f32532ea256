package k8s

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// objectKind lists one kind of object in every namespace; list returns
// one of client-go's *XList.
type objectKind struct {
	name string
	list func(context.Context, kubernetes.Interface, metav1.ListOptions) (runtime.Object, error)
}

// labeledKinds are the kinds a run creates that deleteLabeled removes by
// label in every namespace, in the order Clean reports them.
var labeledKinds = []objectKind{
	{"daemonset", func(ctx context.Context, cs kubernetes.Interface, lo metav1.ListOptions) (runtime.Object, error) {
		return cs.AppsV1().DaemonSets("").List(ctx, lo)
	}},
	{"service", func(ctx context.Context, cs kubernetes.Interface, lo metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().Services("").List(ctx, lo)
	}},
	{"pod", func(ctx context.Context, cs kubernetes.Interface, lo metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().Pods("").List(ctx, lo)
	}},
	{"secret", func(ctx context.Context, cs kubernetes.Interface, lo metav1.ListOptions) (runtime.Object, error) {
		return cs.CoreV1().Secrets("").List(ctx, lo)
	}},
	{"networkpolicy", func(ctx context.Context, cs kubernetes.Interface, lo metav1.ListOptions) (runtime.Object, error) {
		return cs.NetworkingV1().NetworkPolicies("").List(ctx, lo)
	}},
}

// listObjects names the objects of kinds that lo selects, as
// kind/namespace/name (kind/name for cluster-wide ones). A kind that
// cannot be listed (RBAC) is left out: the caller still handles what it
// may see.
func listObjects(ctx context.Context, cs kubernetes.Interface, lo metav1.ListOptions, kinds []objectKind) []string {
	var out []string
	for _, k := range kinds {
		list, err := k.list(ctx, cs, lo)
		if err != nil {
			continue
		}
		_ = eachObject(list, func(m metav1.Object) {
			if ns := m.GetNamespace(); ns != "" {
				out = append(out, k.name+"/"+ns+"/"+m.GetName())
			} else {
				out = append(out, k.name+"/"+m.GetName())
			}
		})
	}
	return out
}

// objectNames names the objects of a List call's answer (one of
// client-go's *XList), or passes on its error.
func objectNames(list runtime.Object, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	var names []string
	err = eachObject(list, func(m metav1.Object) { names = append(names, m.GetName()) })
	return names, err
}

// eachObject calls f with each object of list, one of client-go's *XList.
func eachObject(list runtime.Object, f func(metav1.Object)) error {
	return meta.EachListItem(list, func(o runtime.Object) error {
		m, err := meta.Accessor(o)
		if err == nil {
			f(m)
		}
		return err
	})
}
