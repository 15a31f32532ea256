// Package result defines the one document every measurement produces, whether
// it came from the built-in engine, a reference tool (qperf, iperf3, sockperf)
// or a pod in a Kubernetes cluster. The store, the statistics and the reports
// read only this type.
//
// Units are in the field names (…_ns, …_bps, …_pct, …_seconds) so a reader
// cannot confuse a round trip with a one-way time, or bits with bytes.
//
// A value that could not be measured is a nil pointer (JSON null) with an
// entry in Missing that says why. It is never 0: a zero is a measurement.
package result

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SchemaVersion names this version of the JSON document. Bump it on any
// change a consumer could notice, and document the change in docs/json-schema.md.
const SchemaVersion = "cnibench.result/v1"

// Test names, in the qperf/netperf convention.
const (
	TCPLat = "tcp_lat" // TCP ping-pong on one connection, TCP_NODELAY (qperf tcp_lat, netperf TCP_RR)
	UDPLat = "udp_lat" // UDP ping-pong with sequence numbers
	TCPCRR = "tcp_crr" // connect, request, response, close per transaction (netperf TCP_CRR)
	TCPBW  = "tcp_bw"  // TCP streaming
	UDPBW  = "udp_bw"  // UDP streaming, counted by sequence number
)

// Tests lists every test name in report order.
var Tests = []string{TCPLat, UDPLat, TCPCRR, TCPBW, UDPBW}

// Control-plane-to-datapath latencies (`cnibench k8s latency`, see
// ControlPlane): not engine tests, so not in Tests (no `--test` takes them).
const (
	SvcLatency         = "svc_latency"          // a new Service until it answers from every node
	NetpolDenyLatency  = "netpol_deny_latency"  // a deny NetworkPolicy until the first refusal on every node
	NetpolAllowLatency = "netpol_allow_latency" // an allow NetworkPolicy until the first success on every node
	PodReadyLatency    = "pod_ready_latency"    // a new pod until its first answered packet from every node
)

// ControlPlaneTests lists the control-plane latency tests in report order.
var ControlPlaneTests = []string{SvcLatency, NetpolDenyLatency, NetpolAllowLatency, PodReadyLatency}

// A disruption run's events (`cnibench disrupt run`, see Disruption) are
// stored as one result per event and probe, under the test
// disrupt/<probe>/<event kind>: not engine tests either.
const disruptionPrefix = "disrupt/"

// DisruptionTest is the test name of the events of one kind seen by one
// probe, e.g. disrupt/udp-rr/blackhole.
func DisruptionTest(probe, event string) string { return disruptionPrefix + probe + "/" + event }

// IsDisruptionTest reports whether test names a DisruptionTest.
func IsDisruptionTest(test string) bool { return strings.HasPrefix(test, disruptionPrefix) }

// A pressure run's ramps (`cnibench pressure`, see Pressure) are stored as
// one result per ramp, under the test pressure/<held flows>: ramps with
// different held flows have different knees, so they are different cells.
const pressurePrefix = "pressure/"

// PressureTest is the test name of the ramps that held flows flows, e.g.
// pressure/12000.
func PressureTest(flows int) string { return pressurePrefix + strconv.Itoa(flows) }

// PressureFlows is the held flows a PressureTest names; false for any
// other test.
func PressureFlows(test string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(test, pressurePrefix))
	return n, err == nil && strings.HasPrefix(test, pressurePrefix)
}

// ValidTest reports whether name is a known test.
func ValidTest(name string) bool {
	for _, t := range Tests {
		if t == name {
			return true
		}
	}
	return false
}

// Result is one measurement of one test at one message size.
type Result struct {
	Schema       string    `json:"schema"`
	Tool         Tool      `json:"tool"`
	Test         string    `json:"test"`
	MsgSizeBytes int       `json:"msg_size_bytes"`
	Parallel     int       `json:"parallel"`
	Server       string    `json:"server"` // address:port the client measured against
	Start        time.Time `json:"start"`
	// DurationSeconds is the measured interval, warmup excluded.
	DurationSeconds float64 `json:"duration_seconds"`
	WarmupSeconds   float64 `json:"warmup_seconds"`

	Latency      *Latency      `json:"latency,omitempty"`
	Transactions *Transactions `json:"transactions,omitempty"`
	Throughput   *Throughput   `json:"throughput,omitempty"`
	UDP          *UDP          `json:"udp,omitempty"`
	TCP          *TCP          `json:"tcp,omitempty"`
	CPU          *CPU          `json:"cpu,omitempty"`
	// ControlPlane is one trial of a control-plane latency test
	// (ControlPlaneTests); nil for the engine's tests.
	ControlPlane *ControlPlane `json:"control_plane,omitempty"`
	// Disruption is one event of a disruption run as one probe saw it
	// (DisruptionTest); nil otherwise.
	Disruption *Disruption `json:"disruption,omitempty"`
	// Pressure is one ramp of a pressure run (PressureTest); nil
	// otherwise.
	Pressure *Pressure `json:"pressure,omitempty"`
	// Streams holds each stream or connection of a --parallel run; the
	// top-level figures are their sum (rates) or merge (latency).
	Streams []Stream `json:"streams,omitempty"`
	Env     Env      `json:"env"`
	// Conditions is what the runner did and saw around the measurement:
	// the wake-up policy, CPU placement and whether the machine was
	// disturbed. Absent for a bare `cnibench client`.
	Conditions *Conditions `json:"conditions,omitempty"`
	// PathMTU is the path this result crossed, probed once per arm before
	// its steps (cnibench run) or before the tests (client --path-mtu):
	// its MTU, how that is bounded, TCP's MSS over it. Absent when not
	// probed.
	PathMTU *PathMTU `json:"path_mtu,omitempty"`

	// Missing maps a dotted field path (e.g. "cpu.server.softirq_pct") to the
	// reason it could not be measured.
	Missing map[string]string `json:"missing,omitempty"`
}

// Tool says what produced the numbers.
type Tool struct {
	Name    string `json:"name"` // cnibench, qperf, iperf3, sockperf
	Version string `json:"version"`
	// Command is the command line a reference tool was run with, so a reader
	// can reproduce it by hand.
	Command []string `json:"command,omitempty"`
}

// Latency is a request/response time distribution.
type Latency struct {
	// RTTNs is the full request/response round trip.
	RTTNs Dist `json:"rtt_ns"`
	// OneWayNs is RTT/2, the convention qperf and sockperf print.
	OneWayNs Dist `json:"one_way_ns"`
	// CDF is the round-trip distribution as (percentile, ns) points, for charts.
	CDF []CDFPoint `json:"cdf,omitempty"`
}

// Dist summarises a distribution. Percentile fields are nil when the tool
// that produced the result does not report them.
type Dist struct {
	Count  int64    `json:"count"`
	Min    *float64 `json:"min"`
	Mean   *float64 `json:"mean"`
	Stddev *float64 `json:"stddev"`
	P50    *float64 `json:"p50"`
	P90    *float64 `json:"p90"`
	P99    *float64 `json:"p99"`
	P999   *float64 `json:"p99_9"`
	Max    *float64 `json:"max"`
}

// Halved returns d with every value divided by two: the one-way convention
// (RTT/2) that qperf and sockperf print, for Latency.OneWayNs.
func (d Dist) Halved() Dist {
	h := func(p *float64) *float64 {
		if p == nil {
			return nil
		}
		return F(*p / 2)
	}
	return Dist{Count: d.Count, Min: h(d.Min), Mean: h(d.Mean), Stddev: h(d.Stddev),
		P50: h(d.P50), P90: h(d.P90), P99: h(d.P99), P999: h(d.P999), Max: h(d.Max)}
}

// CDFPoint is one point of a cumulative distribution.
type CDFPoint struct {
	Percentile float64 `json:"percentile"`
	Ns         float64 `json:"ns"`
}

// Transactions counts request/response exchanges (tcp_lat, udp_lat, tcp_crr).
type Transactions struct {
	Count  int64   `json:"count"`
	PerSec float64 `json:"per_sec"`
}

// Throughput is a streaming rate seen by each side.
type Throughput struct {
	SenderBps     *float64 `json:"sender_bps"`
	ReceiverBps   *float64 `json:"receiver_bps"`
	SenderPps     *float64 `json:"sender_pps"`
	ReceiverPps   *float64 `json:"receiver_pps"`
	BytesSent     *int64   `json:"bytes_sent"`
	BytesReceived *int64   `json:"bytes_received"`
}

// UDP is the receiver's accounting by sequence number, plus the kernel's
// own drop counters in the receiver's network namespace.
type UDP struct {
	Sent     int64 `json:"sent"`
	Received int64 `json:"received"`
	Lost     int64 `json:"lost"`
	// OutOfOrder and Duplicated need a sequence number per datagram; they
	// are null (with the reason in Missing) when the tool or the message
	// size gives none.
	OutOfOrder *int64   `json:"out_of_order"`
	Duplicated *int64   `json:"duplicated"`
	LossPct    float64  `json:"loss_pct"`
	JitterNs   *float64 `json:"jitter_ns"`
	// Deltas of /proc/net/snmp Udp counters over the measured interval, in
	// the receiver's namespace.
	KernelRcvbufErrors *int64 `json:"kernel_rcvbuf_errors"`
	KernelInErrors     *int64 `json:"kernel_in_errors"`
}

// TCP holds TCP_INFO figures.
type TCP struct {
	Retransmits *int64 `json:"retransmits"`
}

// CPU is what each side spent over the measured interval.
type CPU struct {
	Client *CPUSide `json:"client"`
	Server *CPUSide `json:"server"`
	// Datapath is the userspace datapath's own daemon (ovs-vswitchd and
	// its PMD threads) on lab topologies that have one, or the datapath
	// agents of the client's and server's nodes in a Kubernetes run taken
	// with --agent-cpu; nil elsewhere.
	Datapath *DatapathCPU `json:"datapath,omitempty"`
}

// DatapathCPU is what a userspace datapath's daemon spent over the measured
// interval: the packet switching that neither the client's nor the server's
// process time contains (on OVS-DPDK, the PMD threads' polling).
type DatapathCPU struct {
	Process string   `json:"process"` // e.g. "ovs-vswitchd"
	Seconds *float64 `json:"seconds"` // on-CPU time of all its threads
	Pct     *float64 `json:"pct"`     // Seconds over wall time, 100 = one CPU
	// PMDSeconds and PMDPct are the poll-mode threads' share of it.
	PMDSeconds *float64 `json:"pmd_seconds"`
	PMDPct     *float64 `json:"pmd_pct"`
	// PMDBusyPct is the PMDs' processing cycles over their processing and
	// idle cycles (ovs-appctl dpif-netdev/pmd-stats-show, cleared at the
	// interval's start): how much of the polling moved packets.
	PMDBusyPct *float64 `json:"pmd_busy_pct"`
	// Derived, like CPUSide's: daemon CPU per transaction and per GB.
	UsPerTransaction *float64 `json:"us_per_transaction"`
	SecondsPerGB     *float64 `json:"seconds_per_gb"`
	// Agents, in a Kubernetes run, are the agent processes whose CPU
	// Seconds sums: one entry per node and agent name.
	Agents []AgentCPU `json:"agents,omitempty"`
}

// AgentCPU is what one datapath agent (flanneld, kube-proxy, ovs-vswitchd…)
// on one node spent over the measured interval.
type AgentCPU struct {
	Node    string   `json:"node"`
	Process string   `json:"process"`
	PIDs    []int    `json:"pids"`
	Seconds *float64 `json:"seconds"` // user+system time of all its processes
	Pct     *float64 `json:"pct"`     // Seconds over wall time, 100 = one CPU
	// Missing says why Seconds is null.
	Missing string `json:"missing,omitempty"`
}

// CPUSide is one side's process time, the host's CPU split from /proc/stat,
// and derived costs.
type CPUSide struct {
	ProcessSeconds       *float64 `json:"process_seconds"` // user+sys of the process
	ProcessUserSeconds   *float64 `json:"process_user_seconds"`
	ProcessSystemSeconds *float64 `json:"process_system_seconds"`
	// ProcessPct is process_seconds over wall time, 100 = one core busy.
	ProcessPct *float64 `json:"process_pct"`
	// Host-wide split of all CPUs over the interval (sums to ~100).
	UserPct    *float64   `json:"user_pct"`
	SystemPct  *float64   `json:"system_pct"`
	SoftirqPct *float64   `json:"softirq_pct"`
	IrqPct     *float64   `json:"irq_pct"`
	IdlePct    *float64   `json:"idle_pct"`
	IowaitPct  *float64   `json:"iowait_pct"`
	StealPct   *float64   `json:"steal_pct"`
	PerCPU     []CPUSplit `json:"per_cpu,omitempty"`
	// HostBusyPct is the whole host's busy CPU time over wall time, where
	// 100 = one CPU busy. It is what qperf reports as cpus_used (read from
	// /proc/stat, so it counts every process, not only the tool's).
	HostBusyPct *float64 `json:"host_busy_pct,omitempty"`
	// Derived: process CPU per transaction, and per gigabyte moved.
	UsPerTransaction *float64 `json:"us_per_transaction"`
	SecondsPerGB     *float64 `json:"seconds_per_gb"`
	// RanOn is where this side's measuring threads ran, pinned or not:
	// the share of evenly spaced samples (sched_getcpu in the hot loop)
	// taken on each CPU, largest first; empty when not sampled (a
	// reference tool, an older engine).
	RanOn []CPUShare `json:"ran_on,omitempty"`
}

// CPUShare is the share, in percent, of a thread's samples taken on one CPU.
type CPUShare struct {
	CPU int     `json:"cpu"`
	Pct float64 `json:"pct"`
}

// CPUSplit is one CPU's split over the interval, in percent.
type CPUSplit struct {
	CPU        int     `json:"cpu"`
	UserPct    float64 `json:"user_pct"`
	SystemPct  float64 `json:"system_pct"`
	SoftirqPct float64 `json:"softirq_pct"`
	IrqPct     float64 `json:"irq_pct"`
	IdlePct    float64 `json:"idle_pct"`
	IowaitPct  float64 `json:"iowait_pct"`
	StealPct   float64 `json:"steal_pct"`
}

// Stream is one stream or connection of a --parallel run.
type Stream struct {
	ID           int           `json:"id"`
	Throughput   *Throughput   `json:"throughput,omitempty"`
	Transactions *Transactions `json:"transactions,omitempty"`
	UDP          *UDP          `json:"udp,omitempty"`
	Retransmits  *int64        `json:"retransmits,omitempty"`
}

// Env fingerprints where a result was taken, so runs from different hosts
// and kernels can be compared in one report.
type Env struct {
	Client *Fingerprint `json:"client,omitempty"`
	Server *Fingerprint `json:"server,omitempty"`
}

// ControlPlane is one trial of `cnibench k8s latency`: an object created
// through the API until the datapath of every node acts on it.
type ControlPlane struct {
	// Object is what the trial created: service, networkpolicy-deny,
	// networkpolicy-allow or pod.
	Object string `json:"object"`
	// SentAt is when the create request left; CreatedAt when the API
	// server's answer arrived, the start every latency is counted from.
	SentAt    time.Time `json:"sent_at"`
	CreatedAt time.Time `json:"created_at"`
	// LatencyNs is the slowest node's: the object works "from every node".
	LatencyNs *float64 `json:"latency_ns"`
	// Nodes are each node's latency; a node that never saw the change in
	// time has a null latency and an error.
	Nodes []ControlPlaneNode `json:"nodes"`
	// KubeProxySync is what kube-proxy on the slowest node did between the
	// create and that node's datapath seeing it (its own metrics,
	// ControlPlaneNode.KubeProxy): "full" (a full sync among them),
	// "partial" (partial syncs only) or "none" (no sync at all: the
	// datapath answered with rules kube-proxy had not rewritten since the
	// previous trial); "" when not known.
	KubeProxySync string `json:"kube_proxy_sync,omitempty"`
}

// Disruption is what one event did to one probe's requests (pkg/disrupt
// measures it; its result document has the whole timeline). A figure that
// could not be measured is null with a reason in Result.Missing under
// disruption.<field>.
type Disruption struct {
	Probe string `json:"probe"`
	Event string `json:"event"`
	// Label is "revert" for the undo of a lasting change, judged as its
	// kind; "" for the change itself.
	Label string `json:"label,omitempty"`
	// StartMs is the event's start from the probes' start.
	StartMs float64 `json:"start_ms"`
	// LongestGapMs is the longest run of unanswered requests in the
	// event's window; 0 when every request was answered.
	LongestGapMs float64 `json:"longest_gap_ms"`
	// Lost is the requests failed or timed out in the window.
	Lost int `json:"lost"`
	// RecoverMs is from the event's start to the first answer after the
	// window's last loss.
	RecoverMs *float64 `json:"recover_ms"`
	// P99Us is the answered requests' p99 in the window.
	P99Us *float64 `json:"p99_us"`
	// AgentCPUMs is the CPU the datapath agent spent on the change.
	AgentCPUMs *float64 `json:"agent_cpu_ms"`
}

// Pressure is one ramp of `cnibench pressure` (pkg/pressure measures it;
// its document has every step): new connections offered at rising rates
// beside Flows held flows until the knee. A figure that could not be
// measured is null with a reason in Result.Missing under pressure.<field>.
type Pressure struct {
	Flows int `json:"flows"`
	// KneePerS is the achieved rate of the last step that held before the
	// knee: the most new connections per second the datapath carried.
	// Null when every step held (no knee: the ramp's top is only a lower
	// bound) or the first step already failed.
	KneePerS *float64 `json:"knee_per_s"`
	// FailedOfferedPerS and Cause are the knee's failing step and why it
	// failed; absent with KneePerS's reason when there was no knee.
	FailedOfferedPerS *float64 `json:"failed_offered_per_s,omitempty"`
	Cause             string   `json:"cause,omitempty"`
	// PeakPerS is the highest achieved rate of any step of the ramp, the
	// knee's included.
	PeakPerS float64 `json:"peak_per_s"`
}

// ControlPlaneNode is one node's part of a ControlPlane trial.
type ControlPlaneNode struct {
	Node string `json:"node"`
	// LatencyNs is the start of the first attempt that saw the change
	// (a success, or a refusal for a deny policy) minus CreatedAt.
	LatencyNs *float64 `json:"latency_ns"`
	// ResolutionNs is how far before that attempt the change may have
	// happened: since the last attempt that did not see it, or since
	// CreatedAt when none did.
	ResolutionNs *float64 `json:"resolution_ns,omitempty"`
	Error        string   `json:"error,omitempty"`
	// KubeProxy is what the node's kube-proxy did during the trial, from
	// its Prometheus metrics read before and after; absent when not read.
	KubeProxy *KubeProxySyncs `json:"kube_proxy,omitempty"`
}

// KubeProxySyncs is one node's kube-proxy during one trial: the syncs it
// finished between two reads of its metrics, the first taken before the
// create's request left, the last after the node's datapath saw the change.
// Times are ms from the trial's CreatedAt, kube-proxy's own timestamps.
type KubeProxySyncs struct {
	// FromMs and ToMs are when the bounding reads were taken: the last
	// before the request left, the first 150 ms after the node's datapath
	// saw the change (k8s.KubeProxyStampLag).
	FromMs float64 `json:"from_ms"`
	ToMs   float64 `json:"to_ms"`
	// FullSyncs and PartialSyncs count the syncs in the window that
	// programmed the change (KubeProxySync.Between): stamped as the
	// node's datapath saw it.
	FullSyncs    int `json:"full_syncs"`
	PartialSyncs int `json:"partial_syncs"`
	// Syncs are every sync that ended in the window, in order.
	Syncs []KubeProxySync `json:"syncs,omitempty"`
	// LastFullMs is when the latest full sync before the window ended;
	// nil when none ended since the metrics were first read.
	LastFullMs *float64 `json:"last_full_ms,omitempty"`
	// ProgrammingCount and ProgrammingMeanMs are kube-proxy's own
	// network-programming latency observations in the window
	// (kubeproxy_network_programming_duration_seconds).
	ProgrammingCount  int      `json:"programming_count"`
	ProgrammingMeanMs *float64 `json:"programming_mean_ms,omitempty"`
	// Error says why there is no count (the metrics could not be read).
	Error string `json:"error,omitempty"`
}

// KubeProxySync is one or more syncs of one kind that ended between two
// consecutive reads of kube-proxy's metrics.
type KubeProxySync struct {
	Kind  string `json:"kind"` // full or partial
	Count int    `json:"count"`
	// EndMs is kube-proxy's last-sync timestamp at the read after them:
	// the end of the latest sync of any kind (of this one when Count is 1
	// and no other kind ended between the two reads).
	EndMs float64 `json:"end_ms"`
	// DurationMs is their mean duration.
	DurationMs float64 `json:"duration_ms"`
	// Between: kube-proxy stamped its end as the node's datapath saw the
	// change (k8s.CountSyncsBetween): it is what programmed it.
	Between bool `json:"between"`
}

// Fingerprint describes one host. Empty strings mean "could not be read";
// the reason is in Missing of the enclosing Result or in Notes.
type Fingerprint struct {
	Hostname   string            `json:"hostname"`
	Kernel     string            `json:"kernel"`
	Distro     string            `json:"distro"`
	CPUModel   string            `json:"cpu_model"`
	Cores      int               `json:"cores"`
	Governor   string            `json:"governor"`
	NICDrivers map[string]string `json:"nic_drivers,omitempty"`
	Cnibench   string            `json:"cnibench_version"`
	Notes      map[string]string `json:"notes,omitempty"`
	// Capabilities are the ids `cnibench probe` found supported on the
	// host when the run started (e.g. vxlan, tcx, ovs-userspace), so runs
	// from different kernels say what each could build.
	Capabilities []string `json:"capabilities,omitempty"`
}

// New returns a Result with the schema set.
func New(tool Tool, test string, msgSize int) *Result {
	return &Result{Schema: SchemaVersion, Tool: tool, Test: test, MsgSizeBytes: msgSize, Parallel: 1}
}

// SetMissing records why the value at path could not be measured.
func (r *Result) SetMissing(path, reason string) {
	if r.Missing == nil {
		r.Missing = map[string]string{}
	}
	r.Missing[path] = reason
}

// MissingPaths returns the missing field paths in sorted order.
func (r *Result) MissingPaths() []string {
	p := make([]string, 0, len(r.Missing))
	for k := range r.Missing {
		p = append(p, k)
	}
	sort.Strings(p)
	return p
}

// Decode parses a JSON result and checks its schema version.
func Decode(b []byte) (*Result, error) {
	var r Result
	if err := decodeVersioned(b, &r, &r.Schema, "result", SchemaVersion); err != nil {
		return nil, err
	}
	return &r, nil
}

// decodeVersioned unmarshals b into doc and refuses it unless the schema
// field it fills (schema, a field of doc) names want: a document of another
// version would decode into zeros where its fields moved. what names the
// document in the errors.
func decodeVersioned(b []byte, doc any, schema *string, what, want string) error {
	if err := json.Unmarshal(b, doc); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	if *schema != want {
		return fmt.Errorf("decode %s: schema %q, this cnibench reads %q", what, *schema, want)
	}
	return nil
}

// F returns a pointer to v, for filling optional fields.
func F(v float64) *float64 { return &v }

// I returns a pointer to v.
func I(v int64) *int64 { return &v }

// SetSchemaVersion names the document `cnibench client --json` prints.
const SetSchemaVersion = "cnibench.results/v1"

// Set is a list of results from one client invocation (several tests or
// message sizes).
type Set struct {
	Schema  string    `json:"schema"`
	Results []*Result `json:"results"`
	// Profiles holds the CPU profile of each result's measured window
	// (`cnibench client --profile --json`), so a caller that only sees the
	// client's output (a Kubernetes pod's log) can store them.
	Profiles []*WindowProfile `json:"profiles,omitempty"`
}

// WindowProfile is one measured window's CPU profile: every CPU sampled
// with kernel callchains (pkg/profile), as folded stacks.
type WindowProfile struct {
	Test         string `json:"test"`
	MsgSizeBytes int    `json:"msg_size_bytes"`
	Event        string `json:"event"`
	FrequencyHz  int    `json:"frequency_hz"`
	CPUs         int    `json:"cpus"`
	WindowNs     int64  `json:"window_ns"`
	Samples      uint64 `json:"samples"`
	Lost         uint64 `json:"lost"`
	// PeriodSum is the samples' periods summed: CPU-ns for cpu-clock.
	PeriodSum uint64 `json:"period_sum"`
	// Folded is "comm;frame;…;leaf count" lines, root first.
	Folded string `json:"folded"`
	// Missing says why there is no profile (e.g. the test ended inside its
	// warmup); the other fields are then empty.
	Missing string `json:"missing,omitempty"`
}

// DecodeSet parses a Set and checks its schema versions.
func DecodeSet(b []byte) (*Set, error) {
	var s Set
	if err := decodeVersioned(b, &s, &s.Schema, "result set", SetSchemaVersion); err != nil {
		return nil, err
	}
	for i, r := range s.Results {
		if r == nil || r.Schema != SchemaVersion {
			return nil, fmt.Errorf("decode result set: result %d: schema is not %q", i, SchemaVersion)
		}
	}
	return &s, nil
}

// Conditions records how a sample was taken and what else happened on the
// machine meanwhile, so a reader can tell a datapath's cost from the host's.
type Conditions struct {
	// Wakeup is the wake-up policy in force: none, hold or spin (see
	// pkg/wakeup); WakeupWhy says how auto chose it.
	Wakeup    string `json:"wakeup"`
	WakeupWhy string `json:"wakeup_why,omitempty"`
	// IdleWakeupUs is the host's idle wake-up penalty one way
	// (IdleWakeup.PenaltyUs); nil when it was not measured. Runs stored
	// before IdleWakeup existed hold a pipe ping-pong's one-way time here.
	IdleWakeupUs *float64 `json:"idle_wakeup_us,omitempty"`
	// IdleWakeup is how the penalty was measured, once at the start of the
	// run; nil when it was not.
	IdleWakeup *IdleWakeup `json:"idle_wakeup,omitempty"`
	// ClientCPU and ServerCPU are the CPUs the client and server processes
	// were pinned to; nil = not pinned.
	ClientCPU *int `json:"client_cpu"`
	ServerCPU *int `json:"server_cpu"`
	// Disturbance is what the rest of the machine did during the step.
	Disturbance *Disturbance `json:"disturbance,omitempty"`
	// RetakeOf is the sequence number (seq) of the disturbed sample this
	// one retakes (--retake-disturbed); nil = not a retake.
	RetakeOf *int `json:"retake_of,omitempty"`
}

// IdleWakeup is the host's idle wake-up penalty: tcp_lat 1 B on the
// baseline arm's own path, alternated with idle CPUs free to halt (policy
// none) and held awake (hold), at the run's placement. It is a property of
// the host (its cpuidle driver and hypervisor), not of a datapath.
type IdleWakeup struct {
	Arm    string `json:"arm"`
	Rounds int    `json:"rounds"`
	// NoneUs and HoldUs are the medians of the rounds' one-way times.
	NoneUs float64 `json:"none_us"`
	HoldUs float64 `json:"hold_us"`
	// PenaltyUs is NoneUs - HoldUs: what one message pays for waking
	// an idle CPU when nothing keeps it awake.
	PenaltyUs float64 `json:"penalty_us"`
	// Missing says why the probe gave no figure (then the rest is zero).
	Missing string `json:"missing,omitempty"`
}

// Disturbance stamps one step with what else ran. Disturbed is set when
// any figure passes its threshold, and Why names which.
type Disturbance struct {
	// StealPct is the host's steal time over the step (percent of all CPUs).
	StealPct float64 `json:"steal_pct"`
	// OthersCPUPct is the CPU time of processes that are not part of the
	// measurement (not the engine, a reference tool, Open vSwitch, a kernel
	// thread or the wake-up spinner) over the step, 100 = one CPU.
	OthersCPUPct float64 `json:"others_cpu_pct"`
	// Busiest names the process that took most of OthersCPUPct.
	Busiest string `json:"busiest,omitempty"`
	// Load1 is the one-minute load average at the end of the step.
	Load1 float64 `json:"load1"`
	// SpinSlowdown is how much longer a fixed spin loop took right after
	// the step than the fastest it ran in this run (1 = as fast).
	SpinSlowdown float64  `json:"spin_slowdown"`
	Disturbed    bool     `json:"disturbed"`
	Why          []string `json:"why,omitempty"`
}
