package pressure

import (
	"fmt"
	"sort"
	"strings"
)

// Schema names the JSON document `cnibench pressure --json` prints.
const Schema = "cnibench.pressure/v1"

// Document is a whole pressure run.
type Document struct {
	Schema     string      `json:"schema"`
	Experiment string      `json:"experiment"`
	Started    string      `json:"started"`
	Config     Config      `json:"config"`
	Arms       []ArmResult `json:"arms"`
}

// ArmResult is one arm's ramps.
type ArmResult struct {
	Arm      string            `json:"arm"`
	Topology string            `json:"topology"`
	Knobs    map[string]string `json:"knobs,omitempty"`
	Ramps    []Ramp            `json:"ramps"`
}

// Ramp is one ramp: held flows, then the rate steps up to the knee.
type Ramp struct {
	Flows  int  `json:"flows"`
	Repeat int  `json:"repeat"`
	Held   Held `json:"held"`
	// LabID is the run id of the ramp's lab (its objects are cnb-<id>-…),
	// gone when the ramp is.
	LabID string `json:"lab_id,omitempty"`
	// Sources are the client's source addresses (the pod's own first);
	// SourcesNote says why there is only one where more were asked for.
	Sources     []string `json:"sources"`
	SourcesNote string   `json:"sources_note,omitempty"`
	// Steps run in ascending rate and stop after the knee.
	Steps []Step `json:"steps"`
	// Knee is the first failing step's verdict; nil when every step held
	// (then NoKnee says up to which rate).
	Knee   *Knee  `json:"knee"`
	NoKnee string `json:"no_knee,omitempty"`
	// Error is why the ramp could not run or stopped; "" when it ran.
	Error string `json:"error,omitempty"`
}

// Held is what the holder opened.
type Held struct {
	Asked       int   `json:"asked"`
	Established int64 `json:"established"`
	OpenFailed  int64 `json:"open_failed"`
	// Of those: no answer within 3 s (a SYN dropped twice), refused or
	// reset, and the client's own failures (no descriptor or port).
	OpenTimedOut int64 `json:"open_timed_out"`
	OpenRefused  int64 `json:"open_refused"`
	OpenClient   int64 `json:"open_client_errors"`
	// Counters are the namespaces' counters over the opening, so a flow
	// count the datapath could not hold says why.
	Counters    []NSCounters `json:"counters,omitempty"`
	OpenSeconds float64      `json:"open_seconds"`
}

// Step is one offered rate.
type Step struct {
	OfferedRate  float64 `json:"offered_per_s"`
	AchievedRate float64 `json:"achieved_per_s"`
	StepCounts
	// FailedShare is the share of attempted connections that failed
	// (timed out, refused, reset, no source port, other errors).
	FailedShare float64 `json:"failed_share"`
	// P50Ms and P99Ms are the transaction time of completed connections;
	// null with LatencyMissing when none completed.
	P50Ms          *float64 `json:"p50_ms"`
	P99Ms          *float64 `json:"p99_ms"`
	LatencyMissing string   `json:"latency_missing,omitempty"`
	// ClientCPU is the generator thread's busy share (0..1) over the step:
	// near 1, the client was the limit.
	ClientCPU float64 `json:"client_cpu"`
	// HostCPUBusy is the host's busy share (0..1, all CPUs, 1 − idle −
	// iowait − steal); null with HostCPUMissing when it could not be read.
	HostCPUBusy    *float64 `json:"host_cpu_busy"`
	HostCPUMissing string   `json:"host_cpu_missing,omitempty"`
	// HeldAlive, HeldBroken, HeldStalled: the held flows at the step's end.
	HeldAlive   int64 `json:"held_alive"`
	HeldBroken  int64 `json:"held_broken"`
	HeldStalled int64 `json:"held_stalled"`
	// OVS is an OVS arm's datapath over the step (ovs.go); absent on
	// kernel datapaths, null with OVSMissing when it could not be read.
	OVS        *OVSDatapath `json:"ovs,omitempty"`
	OVSMissing string       `json:"ovs_missing,omitempty"`
	// Namespaces are the lab's namespaces' counters over the step.
	Namespaces []NSCounters `json:"namespaces"`
	OK         bool         `json:"ok"`
}

// NSCounters are one namespace's counters over a step.
type NSCounters struct {
	Netns string `json:"netns"`
	Role  string `json:"role"` // the lab endpoint it is: client, server, node1, …
	// Conntrack is false where nothing is tracked (no table); then Count,
	// Max and the statistics are left out.
	Conntrack bool             `json:"conntrack"`
	Count     int64            `json:"count,omitempty"` // entries at the step's end
	Max       int64            `json:"max,omitempty"`   // nf_conntrack_max seen from here
	Stats     *ConntrackStats  `json:"stats,omitempty"` // deltas over the step
	TCP       map[string]int64 `json:"tcp"`             // deltas over the step
}

// Knee is where the ramp failed, and why.
type Knee struct {
	// LastGoodRate is the achieved rate of the last step that held; null
	// when the first step already failed.
	LastGoodRate  *float64 `json:"last_good_per_s"`
	FailedOffered float64  `json:"failed_offered_per_s"`
	// Cause is one of: conntrack_full, conntrack_insert_failed, ovs_upcalls_lost,
	// listen_overflow, client_ports, client_inflight_cap, client_cpu,
	// host_cpu, syn_drops, held_flows_lost, unexplained.
	Cause string `json:"cause"`
	// Evidence are the counters that name it, one sentence each.
	Evidence []string `json:"evidence"`
	// ClientLimited: the cause is the client, not the datapath.
	ClientLimited bool `json:"client_limited"`
}

// stepOK says whether a step held: few enough failures and the rate kept
// (achieved within 10% of offered).
func stepOK(s *Step, failShare float64) bool {
	return s.FailedShare <= failShare && s.AchievedRate >= 0.9*s.OfferedRate && s.Capped == 0
}

// failed counts a step's failed connections.
func (c StepCounts) failed() int64 {
	return c.TimedOut + c.Refused + c.Reset + c.AddrNotAvail + c.OtherErrors
}

// explain names the cause of a failed step from its counters, datapath
// first: a counter of the datapath that moved is the answer even when the
// CPUs were busy too (a full table drops whatever the CPU does).
func explain(s *Step) Knee {
	k := Knee{FailedOffered: s.OfferedRate}
	ns := append([]NSCounters(nil), s.Namespaces...)
	sort.SliceStable(ns, func(i, j int) bool { return ns[i].Role < ns[j].Role })
	var full, clash []string
	for _, n := range ns {
		if !n.Conntrack || n.Stats == nil {
			continue
		}
		if n.Stats.Drop > 0 {
			full = append(full, fmt.Sprintf("%s (%s): conntrack count %d of nf_conntrack_max %d; %d packets dropped for want of an entry, %d entries evicted early (early_drop)",
				n.Role, n.Netns, n.Count, n.Max, n.Stats.Drop, n.Stats.EarlyDrop))
		}
		if n.Stats.InsertFailed > 0 {
			clash = append(clash, fmt.Sprintf("%s (%s): %d conntrack inserts failed (insert_failed)", n.Role, n.Netns, n.Stats.InsertFailed))
		}
	}
	tcp := func(role, name string) int64 {
		for _, n := range ns {
			if n.Role == role {
				return n.TCP[name]
			}
		}
		return 0
	}
	syn := tcp("client", "TcpExt.TCPSynRetrans")
	overflow := tcp("server", "TcpExt.ListenOverflows")
	switch {
	case len(full) > 0:
		k.Cause, k.Evidence = "conntrack_full", full
	case len(clash) > 0:
		k.Cause, k.Evidence = "conntrack_insert_failed", clash
	case s.OVS != nil && s.OVS.Lost > 0:
		k.Cause = "ovs_upcalls_lost"
		k.Evidence = []string{fmt.Sprintf("OVS datapath: %d upcalls lost, %d missed (upcalls), %d datapath flows", s.OVS.Lost, s.OVS.Missed, s.OVS.Flows)}
	case overflow > 0:
		k.Cause = "listen_overflow"
		k.Evidence = []string{fmt.Sprintf("server: %d listen queue overflows (ListenOverflows)", overflow)}
	case s.AddrNotAvail > 0:
		k.Cause, k.ClientLimited = "client_ports", true
		k.Evidence = []string{fmt.Sprintf("client: %d connects found no free source port (EADDRNOTAVAIL)", s.AddrNotAvail)}
	case s.ClientCPU >= 0.9:
		k.Cause, k.ClientLimited = "client_cpu", true
		k.Evidence = []string{fmt.Sprintf("client: the generator thread was busy %.0f%% of the step", 100*s.ClientCPU)}
	case s.HostCPUBusy != nil && *s.HostCPUBusy >= 0.95:
		// Before the in-flight cap: on saturated CPUs every connection
		// takes longer, so more are in flight at the same rate, and the
		// cap is reached because of the CPUs, not the client.
		k.Cause = "host_cpu"
		k.Evidence = []string{fmt.Sprintf("host: CPUs busy %.0f%% (client, server and datapath share them; the generator thread %.0f%%)", 100**s.HostCPUBusy, 100*s.ClientCPU)}
		if s.Capped > 0 {
			k.Evidence = append(k.Evidence, fmt.Sprintf("client: %d connections held back at max_inflight as transactions slowed (p99 %s ms)", s.Capped, optMs(s.P99Ms)))
		}
	case s.Capped > 0:
		k.Cause, k.ClientLimited = "client_inflight_cap", true
		k.Evidence = []string{fmt.Sprintf("client: %d connections were due while max_inflight connections were already in flight", s.Capped)}
	case syn > 0:
		k.Cause = "syn_drops"
		k.Evidence = []string{fmt.Sprintf("client: %d SYNs sent again (TCPSynRetrans) with no conntrack drop or listen overflow counted", syn)}
	case s.HeldBroken > 0:
		k.Cause = "held_flows_lost"
		k.Evidence = []string{fmt.Sprintf("%d held flows broke", s.HeldBroken)}
	default:
		k.Cause = "unexplained"
		k.Evidence = []string{"no counter read here moved: " + strings.Join(counterNames(), ", ")}
	}
	if s.OVS != nil && k.Cause != "ovs_upcalls_lost" {
		k.Evidence = append(k.Evidence, fmt.Sprintf("OVS datapath: %d lookups hit, %d missed (upcalls), %d lost, %d flows", s.OVS.Hit, s.OVS.Missed, s.OVS.Lost, s.OVS.Flows))
	}
	if syn > 0 && k.Cause != "syn_drops" {
		k.Evidence = append(k.Evidence, fmt.Sprintf("client: %d SYNs sent again (TCPSynRetrans)", syn))
	}
	return k
}

func counterNames() []string {
	return append([]string{"conntrack drop", "insert_failed", "early_drop"}, tcpCounters...)
}

func sortStrings(s []string) { sort.Strings(s) }
