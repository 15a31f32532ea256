package pressure

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two CPUs' lines as 6.18 prints them (hex), with a column order that
// differs from older kernels', so the parser must go by names.
const ctStat = `entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart
00004000  00000000 00000010 00000000 00000002 00000000 00000000 00000000 00000000 00000001 0000000a 00000003 00000000  00000000 00000000 00000000 00000000
00004000  00000000 00000020 00000000 00000001 00000000 00000000 00000000 00000000 00000000 000000f0 00000000 00000000  00000000 00000000 00000000 00000000
`

func TestParseConntrackStatSumsCPUsByName(t *testing.T) {
	s, err := ParseConntrackStat([]byte(ctStat))
	if err != nil {
		t.Fatal(err)
	}
	want := ConntrackStats{Found: 0x30, Invalid: 3, InsertFailed: 1, Drop: 0xfa, EarlyDrop: 3}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
	d := s.Sub(ConntrackStats{Drop: 0xa, Found: 0x10})
	if d.Drop != 0xf0 || d.Found != 0x20 {
		t.Errorf("Sub: %+v", d)
	}
}

func TestParseConntrackStatRefusesWhatItCannotRead(t *testing.T) {
	for name, in := range map[string]string{
		"empty":          "",
		"no drop column": "entries found insert insert_failed early_drop invalid\n0 0 0 0 0 0\n",
		"no CPU lines":   strings.SplitN(ctStat, "\n", 2)[0] + "\n",
		"bad hex":        strings.Replace(ctStat, "0000000a", "0000000z", 1),
		"short line":     strings.Replace(ctStat, " 00000003 ", " ", 1),
	} {
		if _, err := ParseConntrackStat([]byte(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestParseNetstat(t *testing.T) {
	m, err := ParseNetstat([]byte("TcpExt: SyncookiesSent ListenOverflows TCPSynRetrans\nTcpExt: 0 7 12\nTcp: RtoAlgorithm MaxConn AttemptFails\nTcp: 1 -1 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m["TcpExt.ListenOverflows"] != 7 || m["TcpExt.TCPSynRetrans"] != 12 || m["Tcp.MaxConn"] != -1 || m["Tcp.AttemptFails"] != 4 {
		t.Errorf("%v", m)
	}
	for _, bad := range []string{"TcpExt: A B\n", "TcpExt: A B\nTcpExt: 1\n", "TcpExt: A\nIp: 1\n", "TcpExt: A\nTcpExt: x\n"} {
		if _, err := ParseNetstat([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// readIn reads a namespace's counters through the thread-self paths; a
// fixture tree stands in for /proc.
func TestReadInFixture(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("thread-self/net/netstat", "TcpExt: ListenOverflows ListenDrops TCPSynRetrans\nTcpExt: 1 2 3\n")
	write("thread-self/net/snmp", "Tcp: ActiveOpens PassiveOpens AttemptFails\nTcp: 10 20 30\n")
	s, err := readIn(root)
	if err != nil {
		t.Fatal(err)
	}
	if s.Conntrack || s.TCP["TcpExt.TCPSynRetrans"] != 3 || s.TCP["Tcp.ActiveOpens"] != 10 {
		t.Errorf("no conntrack module: %+v", s)
	}
	write("thread-self/net/stat/nf_conntrack", ctStat)
	write("sys/net/netfilter/nf_conntrack_count", "16384\n")
	write("sys/net/netfilter/nf_conntrack_max", "16384\n")
	if s, err = readIn(root); err != nil {
		t.Fatal(err)
	}
	if !s.Conntrack || s.Count != 16384 || s.Max != 16384 || s.Stats.Drop != 0xfa {
		t.Errorf("with conntrack: %+v", s)
	}
	write("sys/net/netfilter/nf_conntrack_max", "lots\n")
	if _, err := readIn(root); err == nil {
		t.Error("a bad nf_conntrack_max read as a number")
	}
}

func TestConfigCheckNamesTheField(t *testing.T) {
	good := Config{Rates: []int{100, 200}}.WithDefaults()
	if err := good.Check(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for want, mod := range map[string]func(*Config){
		"pressure.rates: required":  func(c *Config) { c.Rates = nil },
		"pressure.rates[1]: 100":    func(c *Config) { c.Rates = []int{100, 100} },
		"pressure.rates[0]: 0":      func(c *Config) { c.Rates = []int{0} },
		"pressure.flows[0]: -1":     func(c *Config) { c.Flows = []int{-1} },
		"pressure.step: 10ms":       func(c *Config) { c.Step = Duration(10 * time.Millisecond) },
		"pressure.connect_timeout":  func(c *Config) { c.ConnectTimeout = Duration(time.Minute) },
		"pressure.hold_ping":        func(c *Config) { c.HoldPing = Duration(time.Millisecond) },
		"source ports":              func(c *Config) { c.Flows = []int{50000}; c.MaxInflight = 20000 },
		"pressure.fail_share":       func(c *Config) { c.FailShare = 2 },
		"pressure.sources: 33":      func(c *Config) { c.Sources = 33 },
		"pressure.repeats: 21":      func(c *Config) { c.Repeats = 21 },
		"pressure.max_inflight: -1": func(c *Config) { c.MaxInflight = -1 },
	} {
		c := good
		mod(&c)
		err := c.Check()
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("want one line with %q, got %v", want, err)
		}
	}
}

func TestPercentile(t *testing.T) {
	if _, ok := percentile(nil, 0.5); ok {
		t.Error("no samples gave a percentile")
	}
	xs := []int64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	if p, _ := percentile(xs, 0.5); p != 5 {
		t.Errorf("p50 %d", p)
	}
	if p, _ := percentile(xs, 0.99); p != 10 {
		t.Errorf("p99 %d", p)
	}
}

// explain names the datapath's counter first, then the client, then the
// host's CPUs; each case is built from the counters alone.
func TestExplainPicksTheCause(t *testing.T) {
	busy := 0.99
	ct := func(drop, insertFailed uint64) []NSCounters {
		return []NSCounters{
			{Netns: "cnb-x-node1", Role: "node1", Conntrack: true, Count: 16384, Max: 16384, Stats: &ConntrackStats{Drop: drop, InsertFailed: insertFailed, EarlyDrop: 2}},
			{Netns: "cnb-x-client", Role: "client", Conntrack: true, Stats: &ConntrackStats{}, TCP: map[string]int64{"TcpExt.TCPSynRetrans": 9}},
			{Netns: "cnb-x-server", Role: "server", Conntrack: true, Stats: &ConntrackStats{}, TCP: map[string]int64{}},
		}
	}
	for _, c := range []struct {
		cause  string
		client bool
		step   Step
	}{
		{"conntrack_full", false, Step{Namespaces: ct(5, 0), ClientCPU: 1, HostCPUBusy: &busy}},
		{"conntrack_insert_failed", false, Step{Namespaces: ct(0, 3)}},
		{"listen_overflow", false, Step{Namespaces: append(ct(0, 0)[:2], NSCounters{Role: "server", TCP: map[string]int64{"TcpExt.ListenOverflows": 4}})}},
		{"client_ports", true, Step{Namespaces: ct(0, 0), StepCounts: StepCounts{AddrNotAvail: 1}}},
		{"client_inflight_cap", true, Step{Namespaces: ct(0, 0), StepCounts: StepCounts{Capped: 1}}},
		{"client_cpu", true, Step{Namespaces: ct(0, 0), ClientCPU: 0.95}},
		{"host_cpu", false, Step{Namespaces: ct(0, 0), ClientCPU: 0.5, HostCPUBusy: &busy}},
		{"host_cpu", false, Step{Namespaces: ct(0, 0), ClientCPU: 0.4, HostCPUBusy: &busy, StepCounts: StepCounts{Capped: 7}}},
		{"syn_drops", false, Step{Namespaces: ct(0, 0)}},
		{"held_flows_lost", false, Step{HeldBroken: 3}},
		{"unexplained", false, Step{}},
	} {
		k := explain(&c.step)
		if k.Cause != c.cause || k.ClientLimited != c.client || len(k.Evidence) == 0 {
			t.Errorf("want %s (client %v), got %+v", c.cause, c.client, k)
		}
	}
	k := explain(&Step{Namespaces: ct(5, 0)})
	if !strings.Contains(k.Evidence[0], "count 16384 of nf_conntrack_max 16384") || !strings.Contains(k.Evidence[0], "5 packets dropped") || !strings.Contains(strings.Join(k.Evidence, ";"), "9 SYNs sent again") {
		t.Errorf("evidence %q", k.Evidence)
	}
}

func TestStepOK(t *testing.T) {
	for _, c := range []struct {
		s  Step
		ok bool
	}{
		{Step{OfferedRate: 1000, AchievedRate: 1000}, true},
		{Step{OfferedRate: 1000, AchievedRate: 950, FailedShare: 0.005}, true},
		{Step{OfferedRate: 1000, AchievedRate: 850}, false},
		{Step{OfferedRate: 1000, AchievedRate: 1000, FailedShare: 0.02}, false},
		{Step{OfferedRate: 1000, AchievedRate: 1000, StepCounts: StepCounts{Capped: 1}}, false},
	} {
		if got := stepOK(&c.s, 0.01); got != c.ok {
			t.Errorf("%+v: ok %v", c.s, got)
		}
	}
}

func TestParseDpctlShow(t *testing.T) {
	out := `netdev@ovs-netdev:
  lookups: hit:120 missed:30 lost:2
  flows: 7
  port 0: ovs-netdev (tap)
system@ovs-system:
  lookups: hit:5 missed:1 lost:0
  flows: 3
`
	s, err := parseDpctlShow(out)
	if err != nil {
		t.Fatal(err)
	}
	if s != (ovsSnap{hit: 125, missed: 31, lost: 2, flows: 10}) {
		t.Errorf("%+v", s)
	}
	for _, bad := range []string{"", "netdev@x:\n  flows: 3\n", "netdev@x:\n  lookups: hit:x missed:1 lost:0\n  flows: 1\n"} {
		if _, err := parseDpctlShow(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	k := explain(&Step{OVS: &OVSDatapath{Lost: 4, Missed: 9, Flows: 2}})
	if k.Cause != "ovs_upcalls_lost" {
		t.Errorf("lost upcalls: %+v", k)
	}
}

// The table shows every step's figures, the knee and its evidence, and
// the OVS columns only where a step has them.
func TestWriteText(t *testing.T) {
	p99 := 1.5
	d := &Document{Arms: []ArmResult{{Arm: "ct", Topology: "native", Knobs: map[string]string{"conntrack": "on"}, Ramps: []Ramp{{
		Flows: 10, Held: Held{Established: 10},
		Steps: []Step{{OfferedRate: 100, AchievedRate: 99, P99Ms: &p99, Namespaces: []NSCounters{{Role: "node1", Conntrack: true, Count: 50, Max: 64, Stats: &ConntrackStats{Drop: 7}}}}},
		Knee:  &Knee{FailedOffered: 100, Cause: "conntrack_full", Evidence: []string{"node1: full"}},
	}}}, {Arm: "ovs", Ramps: []Ramp{{Steps: []Step{{OfferedRate: 5, OVS: &OVSDatapath{Missed: 3, Flows: 4}}}, NoKnee: "every step held"}}}}}
	var b strings.Builder
	WriteText(&b, d)
	out := b.String()
	for _, want := range []string{"ct (native conntrack=on), 10 held flows", "50/64", "1.50", "knee: last good none (the first step failed); failed at 100/s offered: conntrack_full (the datapath)", "  node1: full", "ovs upcalls", "no knee: every step held"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Count(out, "ovs upcalls") != 1 {
		t.Errorf("OVS columns on a kernel arm:\n%s", out)
	}
}
