package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AuditOptions configure `cnibench k8s audit`.
type AuditOptions struct {
	Namespace  string
	Image      string
	PullPolicy corev1.PullPolicy
	// Args are extra flags for `cnibench tune audit` (e.g. --profile latency).
	Args    []string
	Timeout time.Duration
	Keep    bool
	Log     io.Writer
}

// Finding is the part of one `cnibench tune audit --json` entry the table
// shows; the field names are tune's JSON names.
type Finding struct {
	Knob        string `json:"knob"`
	Target      string `json:"target,omitempty"`
	Profile     string `json:"profile,omitempty"`
	Current     string `json:"current"`
	Recommended string `json:"recommended,omitempty"`
	Status      string `json:"status"`
	Why         string `json:"why,omitempty"`
}

// NodeAudit is one node's audit, or why there is none.
type NodeAudit struct {
	Node     string    `json:"node"`
	Findings []Finding `json:"findings,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// ParseAudit decodes `cnibench tune audit --json` output: a JSON array of
// findings, possibly after log lines of the same container.
func ParseAudit(b []byte) ([]Finding, error) {
	for i := 0; i < len(b); i++ {
		if b[i] != '[' || (i > 0 && b[i-1] != '\n') {
			continue
		}
		var fs []Finding
		if err := json.NewDecoder(strings.NewReader(string(b[i:]))).Decode(&fs); err == nil {
			return fs, nil
		}
	}
	return nil, fmt.Errorf("no audit JSON in the log; last line: %q", lastLine(b))
}

// Audit runs the audit DaemonSet, waits until every scheduled pod has
// finished its audit (init container done, pod Ready) or the timeout, reads
// each node's findings from the init container's log, and deletes the
// DaemonSet (and the namespace, if it created it).
func (r *Runner) Audit(ctx context.Context, o AuditOptions) (_ []NodeAudit, err error) {
	podDefaults(&o.Namespace, &o.PullPolicy, &o.Log)
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Image == "" {
		return nil, errors.New("no image: pass --image")
	}
	if r.RunID == "" {
		return nil, errors.New("audit: no run id")
	}
	ns := o.Namespace
	createdNS := false
	defer func() {
		if o.Keep {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if cerr := r.deleteRun(cctx, ns, r.RunID, createdNS); cerr != nil && err == nil {
			err = fmt.Errorf("cleanup incomplete (run `cnibench k8s clean`): %w", cerr)
		}
	}()
	createdNS, err = r.ensureNamespace(ctx, ns, r.RunID, o.Timeout)
	if err != nil {
		return nil, err
	}
	po := PodOptions{RunID: r.RunID, Namespace: ns, Image: o.Image, PullPolicy: o.PullPolicy}
	ds := AuditDaemonSet(po, o.Args)
	if _, err := r.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return nil, APIError("create", "daemonset "+ds.Name, err)
	}
	fmt.Fprintf(o.Log, "daemonset %s/%s created; waiting for every node's audit\n", ns, ds.Name)

	pods, err := r.waitAudits(ctx, ns, ds.Name, o.Timeout)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("daemonset %s started no pod within %s (no node can run it?)", ds.Name, o.Timeout)
	}
	var out []NodeAudit
	for i := range pods {
		p := &pods[i]
		na := NodeAudit{Node: p.Spec.NodeName}
		if na.Node == "" {
			na.Node = "(" + p.Name + ", unscheduled)"
		}
		if !initDone(p) {
			na.Error = r.explain(ctx, p)
			if !hopeless(p) {
				na.Error = "not finished after " + o.Timeout.String() + ": " + na.Error
			}
			out = append(out, na)
			continue
		}
		logs, err := r.logs(ctx, ns, p.Name, auditContainer)
		if err != nil {
			na.Error = APIError("read", "log of "+p.Name, err).Error()
		} else if na.Findings, err = ParseAudit(logs); err != nil {
			na.Error = err.Error()
		}
		out = append(out, na)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// initDone reports whether the audit init container exited 0.
func initDone(p *corev1.Pod) bool {
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name == auditContainer {
			t := cs.State.Terminated
			return t != nil && t.ExitCode == 0
		}
	}
	return false
}

// auditSettled: the audit finished, or will never finish.
func auditSettled(p *corev1.Pod) bool {
	if initDone(p) || hopeless(p) {
		return true
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name == auditContainer && cs.State.Terminated != nil {
			return true // exited non-zero: the log says why
		}
	}
	return false
}

// WriteAuditTable prints one row per knob (and target) and one column per
// node: the current value, marked "*" where it differs from the
// recommendation and "?" where it could not be read. Nodes whose audit
// failed are listed below the table with the reason.
func WriteAuditTable(w io.Writer, audits []NodeAudit) error {
	type key struct{ knob, target string }
	cells := map[key]map[string]string{}
	recs := map[key]string{}
	var keys []key
	var nodes []string
	for _, a := range audits {
		if a.Error != "" {
			continue
		}
		nodes = append(nodes, a.Node)
		for _, f := range a.Findings {
			k := key{f.Knob, f.Target}
			if cells[k] == nil {
				cells[k] = map[string]string{}
				keys = append(keys, k)
			}
			if _, dup := cells[k][a.Node]; dup {
				continue // a second profile's line for the same value
			}
			v := f.Current
			switch f.Status {
			case "differs":
				v += " *"
			case "cannot read", "cannot_read", "error":
				v = "?"
			}
			if v == "" {
				v = "-"
			}
			cells[k][a.Node] = v
			if f.Recommended != "" && recs[k] == "" {
				recs[k] = f.Recommended
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "KNOB\tTARGET\tRECOMMENDED")
	for _, n := range nodes {
		fmt.Fprint(tw, "\t"+n)
	}
	fmt.Fprintln(tw)
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s", k.knob, dash(k.target), dash(recs[k]))
		for _, n := range nodes {
			fmt.Fprint(tw, "\t"+dash(cells[k][n]))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(nodes) > 0 {
		fmt.Fprintln(w, "* differs from the recommendation   ? could not be read (see `cnibench tune audit` on the node)")
	}
	for _, a := range audits {
		if a.Error != "" {
			fmt.Fprintf(w, "node %s: no audit: %s\n", a.Node, a.Error)
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
