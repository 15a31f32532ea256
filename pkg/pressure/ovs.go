package pressure

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/lab"
)

// OVSDatapath is an OVS arm's datapath over a step, from `ovs-appctl
// dpctl/show`: lookups that hit a datapath flow, missed it (each miss is
// an upcall to ovs-vswitchd's slow path) or were lost (an upcall dropped),
// and the datapath flows at the step's end.
type OVSDatapath struct {
	Hit    int64 `json:"hit"`
	Missed int64 `json:"missed"`
	Lost   int64 `json:"lost"`
	Flows  int64 `json:"flows"`
	// Shared: the daemon is the host's, whose other bridges count too.
	Shared bool `json:"shared"`
}

type ovsSnap struct{ hit, missed, lost, flows int64 }

// parseDpctlShow sums every datapath's "lookups: hit:H missed:M lost:L"
// and "flows: F" lines.
func parseDpctlShow(out string) (ovsSnap, error) {
	var s ovsSnap
	seenLookups, seenFlows := false, false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(strings.TrimSpace(line))
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "lookups:":
			for _, kv := range f[1:] {
				k, v, ok := strings.Cut(kv, ":")
				n, err := strconv.ParseInt(v, 10, 64)
				if !ok || err != nil {
					return s, fmt.Errorf("dpctl/show: lookups %q", kv)
				}
				switch k {
				case "hit":
					s.hit += n
				case "missed":
					s.missed += n
				case "lost":
					s.lost += n
				}
			}
			seenLookups = true
		case "flows:":
			if len(f) < 2 {
				return s, fmt.Errorf("dpctl/show: %q", line)
			}
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return s, fmt.Errorf("dpctl/show: flows %q", f[1])
			}
			s.flows += n
			seenFlows = true
		}
	}
	if !seenLookups || !seenFlows {
		return s, fmt.Errorf("dpctl/show: no lookups or flows line in %q", strings.TrimSpace(out))
	}
	return s, nil
}

// ovsMeter reads an OVS arm's datapath; nil for a lab without a metered
// ovs-vswitchd.
type ovsMeter struct {
	m      *lab.DatapathMeter
	shared bool
}

func newOVSMeter(l *lab.Lab) *ovsMeter {
	m := l.DatapathMeter()
	if m == nil {
		return nil
	}
	return &ovsMeter{m: m, shared: len(l.PrivateOVS) == 0}
}

func (o *ovsMeter) snap(ctx context.Context) (ovsSnap, error) {
	out, err := o.m.DatapathShow(ctx)
	if err != nil {
		return ovsSnap{}, err
	}
	return parseDpctlShow(out)
}
