// Package k8s runs cnibench's engine as pods in a Kubernetes cluster: server
// and client pods on the same node, across nodes, on the host network, and
// through a ClusterIP Service. It also runs `cnibench tune audit` on every
// node as a DaemonSet, fingerprints the cluster, and removes what it created.
//
// Everything talks to the cluster through kubernetes.Interface, so the unit
// tests drive the same code with client-go's fake clientset. Specs (pods,
// services, the DaemonSet) are built by pure functions; only Runner touches
// the API server.
//
// Every object carries app.kubernetes.io/managed-by=cnibench and
// cnibench.io/run=<run id>, and lives in one namespace (default "cnibench"),
// so a run deletes exactly what it created and `cnibench k8s clean` finds
// whatever an interrupted run left behind.
package k8s
