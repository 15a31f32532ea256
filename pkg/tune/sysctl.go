package tune

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Network sysctls. Which of them are per network namespace was checked on
// kernel 6.18 by listing /proc/sys/net in a fresh namespace: somaxconn and
// the net.ipv4.tcp_* knobs here are per namespace and writable there;
// net.core.{r,w}mem_{max,default} are shown in every namespace but read-only
// outside the initial one (so they are host scope); netdev_max_backlog,
// busy_read, busy_poll and default_qdisc exist only in the initial namespace.

func init() {
	register(
		bufferCapKnob("net.core.rmem_max", "Maximum receive socket buffer (SO_RCVBUF cap)",
			"raises a cap only; applications and OVS must still ask for large buffers; 002 warns it may hurt TCP"),
		bufferCapKnob("net.core.wmem_max", "Maximum send socket buffer (SO_SNDBUF cap)",
			"raises a cap only; 002 warns it may hurt TCP"),
		sysctlKnob("net.core.rmem_default", "Default receive socket buffer", "net.core", ScopeHost,
			"every socket without SO_RCVBUF gets this much; memory per socket", nil, nil),
		sysctlKnob("net.core.wmem_default", "Default send socket buffer", "net.core", ScopeHost,
			"every socket without SO_SNDBUF gets this much; memory per socket", nil, nil),
		sysctlKnob("net.core.netdev_max_backlog", "Per-CPU input queue length (packets)", "net.core", ScopeHost,
			"longer queues add latency under overload", nil, nil),
		busyPollKnob("net.core.busy_read", "Busy-poll time for blocking reads (µs)"),
		busyPollKnob("net.core.busy_poll", "Busy-poll time for poll/select (µs)"),
		sysctlKnob("net.core.somaxconn", "Listen backlog limit", "net.core", ScopeNetns,
			"low", nil, nil),
		sysctlKnob("net.core.default_qdisc", "Default queueing discipline for new interfaces", "net.core", ScopeHost,
			"applies to interfaces created afterwards only", nil,
			map[Profile]Rec{Throughput: {"fq", srcCiliumBBR}}),
		sysctlKnob("net.ipv4.tcp_rmem", "TCP receive buffer min/default/max", "net.ipv4", ScopeNetns,
			"more memory per connection", atLeastFields, map[Profile]Rec{Throughput: {"4096 131072 16777216", srcTunedNetThr}}),
		sysctlKnob("net.ipv4.tcp_wmem", "TCP send buffer min/default/max", "net.ipv4", ScopeNetns,
			"more memory per connection", atLeastFields, map[Profile]Rec{Throughput: {"4096 16384 16777216", srcTunedNetThr}}),
		sysctlKnob("net.ipv4.tcp_fastopen", "TCP Fast Open (1 client, 2 server, 3 both)", "net.ipv4", ScopeNetns,
			"data in SYN; middleboxes may drop it", nil, map[Profile]Rec{Latency: {"3", srcTunedNetLat}}),
		sysctlKnob("net.ipv4.tcp_slow_start_after_idle", "Reset cwnd after an idle period", "net.ipv4", ScopeNetns,
			"low", nil, nil),
		sysctlKnob("net.ipv4.tcp_notsent_lowat", "Unsent data limit before the socket is writable", "net.ipv4", ScopeNetns,
			"low", nil, nil),
		ccKnob(),
	)
	for _, k := range registry {
		if k.Family == "net.core" || k.Family == "net.ipv4" {
			if len(k.Recs) == 0 {
				k.Source = srcKernelDoc
				k.Why = "audited for the record; no source gives a value"
			}
		}
	}
}

// sysctlKnob builds a knob that reads and writes one file under /proc/sys.
// The journal keeps the text as read, so rollback writes back the same bytes.
func sysctlKnob(name, title, family string, scope Scope, risk string,
	j func(*Env, Current, string) (Status, string, string), recs map[Profile]Rec) *Knob {
	rel := "sys/" + strings.ReplaceAll(name, ".", "/")
	return &Knob{
		ID: name, Title: title, Family: family, Scope: scope, Risk: risk, Recs: recs,
		Access: "/proc/" + rel,
		Read: func(e *Env) ([]Current, error) {
			raw, err := readFile(e.proc(rel))
			if err != nil {
				return nil, err
			}
			return []Current{{Value: norm(raw), Raw: raw}}, nil
		},
		Judge: j,
		Write: func(e *Env, _ string, value string, _ bool) error {
			return writeFile(e.proc(rel), value)
		},
	}
}

// bufferCapKnob is net.core.rmem_max or wmem_max: 002's OVS userspace UDP
// tuning raises both caps to the same floor for throughput.
func bufferCapKnob(name, title, risk string) *Knob {
	return sysctlKnob(name, title, "net.core", ScopeHost, risk,
		atLeastInt, map[Profile]Rec{Throughput: {"1073741823", srcOVSUDP}})
}

// busyPollKnob is net.core.busy_read or busy_poll: tuned's network-latency
// profile sets both to the same value, and both cost the same spinning CPU.
func busyPollKnob(name, title string) *Knob {
	return sysctlKnob(name, title, "net.core", ScopeHost,
		"spins a CPU while waiting for packets: more CPU, less latency",
		nil, map[Profile]Rec{Latency: {"50", srcTunedNetLat}})
}

// atLeastInt treats the recommendation as a floor: a larger value is kept.
func atLeastInt(_ *Env, c Current, rec string) (Status, string, string) {
	cur, err1 := strconv.ParseInt(norm(c.Value), 10, 64)
	want, err2 := strconv.ParseInt(rec, 10, 64)
	if err1 != nil || err2 != nil {
		return StatusCannotRead, "", fmt.Sprintf("not a number: %q", c.Value)
	}
	if cur >= want {
		return StatusOK, "", fmt.Sprintf("at least %d", want)
	}
	return StatusDiffers, rec, fmt.Sprintf("below %d", want)
}

// atLeastFields is atLeastInt field by field (tcp_rmem "min default max");
// apply writes the field-wise maximum so no field is lowered.
func atLeastFields(_ *Env, c Current, rec string) (Status, string, string) {
	cf, rf := strings.Fields(c.Value), strings.Fields(rec)
	if len(cf) != len(rf) {
		return StatusCannotRead, "", fmt.Sprintf("expected %d fields, got %q", len(rf), c.Value)
	}
	out := make([]string, len(cf))
	low := false
	for i := range cf {
		a, err1 := strconv.ParseInt(cf[i], 10, 64)
		b, err2 := strconv.ParseInt(rf[i], 10, 64)
		if err1 != nil || err2 != nil {
			return StatusCannotRead, "", fmt.Sprintf("not numbers: %q", c.Value)
		}
		if a < b {
			low, a = true, b
		}
		out[i] = strconv.FormatInt(a, 10)
	}
	if !low {
		return StatusOK, "", "each field at least the recommendation"
	}
	return StatusDiffers, strings.Join(out, " "), "a field is below the recommendation"
}

// ccKnob is tcp_congestion_control; it also checks that the recommended
// algorithm is available, since writing an unavailable one fails.
func ccKnob() *Knob {
	k := sysctlKnob("net.ipv4.tcp_congestion_control", "TCP congestion control algorithm", "net.ipv4", ScopeNetns,
		"changes behaviour for every new connection; BBR needs pacing (fq or TCP internal pacing)",
		nil, map[Profile]Rec{Throughput: {"bbr", srcCiliumBBR}})
	k.Access += " (+ tcp_available_congestion_control)"
	k.Judge = func(e *Env, c Current, rec string) (Status, string, string) {
		if c.Value == rec {
			return StatusOK, "", ""
		}
		avail, err := readFile(e.proc("sys/net/ipv4/tcp_available_congestion_control"))
		if err == nil && !containsField(avail, rec) {
			return StatusDiffers, rec, fmt.Sprintf("%s is not available (have: %s); `modprobe tcp_%s` first", rec, norm(avail), rec)
		}
		return StatusDiffers, rec, rec + " is available"
	}
	return k
}

func containsField(s, f string) bool {
	for _, x := range strings.Fields(s) {
		if x == f {
			return true
		}
	}
	return false
}

var sysctlName = regexp.MustCompile(`^[a-z0-9_-]+(\.[A-Za-z0-9_:@-]+)+$`)

// sysctlRel turns net.core.rmem_max into sys/net/core/rmem_max (below /proc).
func sysctlRel(name string) (string, error) {
	if !sysctlName.MatchString(name) {
		return "", fmt.Errorf("sysctl %q: want a dotted name such as net.core.rmem_max", name)
	}
	return "sys/" + strings.ReplaceAll(name, ".", "/"), nil
}
