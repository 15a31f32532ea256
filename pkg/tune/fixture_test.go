package tune

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeNIC stands in for ethtool on fixture hosts.
type fakeNIC struct {
	drivers  map[string]string
	rings    map[string]Ring
	features map[string]map[string]Feature
	ringErr  error
	featErr  error // Features of an interface not in features (default EOPNOTSUPP)
}

func (f *fakeNIC) Driver(n string) (string, error) {
	if d, ok := f.drivers[n]; ok {
		return d, nil
	}
	return "", unix.ENODEV
}
func (f *fakeNIC) Ring(n string) (Ring, error) {
	if f.ringErr != nil {
		return Ring{}, f.ringErr
	}
	r, ok := f.rings[n]
	if !ok {
		return Ring{}, unix.ENODEV
	}
	return r, nil
}
func (f *fakeNIC) SetRing(n string, rx, tx uint32) error {
	r := f.rings[n]
	if rx > r.RXMax || tx > r.TXMax {
		return unix.EINVAL
	}
	r.RX, r.TX = rx, tx
	f.rings[n] = r
	return nil
}
func (f *fakeNIC) Features(n string) (map[string]Feature, error) {
	fs, ok := f.features[n]
	if !ok && f.featErr != nil {
		return nil, f.featErr
	}
	if !ok {
		return nil, unix.EOPNOTSUPP
	}
	return fs, nil
}
func (f *fakeNIC) SetFeature(n, feat string, on bool) error {
	x, ok := f.features[n][feat]
	if !ok {
		return fmt.Errorf("unsupported feature %q", feat)
	}
	if x.Fixed {
		return unix.EPERM
	}
	x.Active = on
	f.features[n][feat] = x
	return nil
}

type noRules struct{}

func (noRules) KubeProxyRules() (int, int, error) { return 12, 0, nil }

type noLinks struct{ links []LinkInfo }

func (n noLinks) Links(string) ([]LinkInfo, error) { return n.links, nil }

// copyTree copies a fixture into a temporary directory so apply can write
// to it; symlinks are copied as symlinks (os.DirFS reads links, and CopyFS
// recreates them).
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// snapshot reads every regular file under root.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		b, err := os.ReadFile(p)
		m[strings.TrimPrefix(p, root)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fixtureEnv(root string) *Env {
	return &Env{ProcRoot: filepath.Join(root, "proc"), SysRoot: filepath.Join(root, "sys"), DevRoot: filepath.Join(root, "dev"),
		OVSDB: filepath.Join(root, "db.sock"), Rules: noRules{}, Links: noLinks{}}
}

func metalEnv(root string) (*Env, *fakeNIC) {
	e := fixtureEnv(root)
	nic := &fakeNIC{
		drivers: map[string]string{"eth0": "ixgbe", "veth0": "veth", "br0": "bridge"},
		rings:   map[string]Ring{"eth0": {RX: 255, TX: 255, RXMax: 4096, TXMax: 4096}},
		features: map[string]map[string]Feature{
			"eth0":  {"tx-tcp-segmentation": {Active: true}, "tx-generic-segmentation": {Active: true}, "rx-gro": {Active: false}, "rx-checksum": {Active: true}, "tx-checksum-ipv4": {Active: true}},
			"veth0": {"tx-tcp-segmentation": {Active: false}, "tx-generic-segmentation": {Active: true}, "rx-gro": {Active: false}, "rx-checksum": {Active: true, Fixed: true}, "tx-checksum-ip-generic": {Active: true}},
		},
	}
	e.NIC = nic
	return e, nic
}

// find returns the findings for one knob (and target, if given) and profile.
func find(fs []Finding, knob, target string, p Profile) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Knob == knob && f.Profile == p && (target == "" || f.Target == target) {
			out = append(out, f)
		}
	}
	return out
}

func one(t *testing.T, fs []Finding, knob, target string, p Profile) Finding {
	t.Helper()
	got := find(fs, knob, target, p)
	if len(got) != 1 {
		t.Fatalf("%s %s %s: %d findings, want 1: %+v", knob, target, p, len(got), got)
	}
	return got[0]
}

func TestAuditMetalFixture(t *testing.T) {
	e, _ := metalEnv("testdata/metal")
	fs := Audit(e, Knobs(), Profiles())
	cases := []struct {
		knob, target string
		p            Profile
		cur          string
		st           Status
	}{
		{"cpu.governor", "cpu0", Latency, "powersave", StatusDiffers},
		{"cpu.governor", "cpu3", Throughput, "powersave", StatusDiffers},
		{"cpu.energy_perf_bias", "cpu1", Latency, "6", StatusDiffers},
		{"cpu.intel_pstate.min_perf_pct", "", Latency, "30", StatusDiffers},
		{"vm.transparent_hugepages", "", Latency, "madvise", StatusDiffers},
		{"kernel.numa_balancing", "", Latency, "1", StatusDiffers},
		{"kernel.numa_balancing", "", Throughput, "1", StatusNoRec},
		{"cpu.flags.popcnt_sse4_2", "", Latency, "popcnt sse4_2", StatusOK},
		{"irq.irqbalance", "", Latency, "running (pid 1234)", StatusDiffers},
		{"irq.nic_affinity", "eth0/irq40", Latency, "cpus 0-3 (mask f)", StatusDiffers},
		{"irq.nic_affinity", "eth0/irq41", Latency, "cpus 1 (mask 2)", StatusOK},
		{"nic.rings", "eth0", Throughput, "rx=255 tx=255 (max rx=4096 tx=4096)", StatusDiffers},
		{"nic.offloads", "eth0/gro", Throughput, "off", StatusDiffers},
		{"nic.offloads", "eth0/tx-checksum", Throughput, "on", StatusOK},
		{"nic.offloads", "veth0/tso", Throughput, "off", StatusDiffers},
		{"nic.offloads", "veth0/rx-checksum", Throughput, "on [fixed]", StatusOK},
		{"net.core.rmem_max", "", Throughput, "212992", StatusDiffers},
		{"net.core.rmem_max", "", Latency, "212992", StatusNoRec},
		{"net.ipv4.tcp_rmem", "", Throughput, "4096 131072 6291456", StatusDiffers},
		{"net.ipv4.tcp_fastopen", "", Latency, "1", StatusDiffers},
		{"net.ipv4.tcp_congestion_control", "", Throughput, "cubic", StatusDiffers},
		{"conntrack.max", "", Latency, "950/1000 entries (95.0%)", StatusDiffers},
		{"conntrack.hashsize", "", Latency, "256 buckets, 3.9 max entries per bucket", StatusNoRec},
		{"kube-proxy.rules", "", Latency, "nftables kube-proxy: 12 rules; iptables-nft KUBE-*: 0 rules; conntrack entries: 950", StatusNoRec},
		{"mtu.consistency", "", Latency, "no tunnel devices", StatusOK},
	}
	for _, c := range cases {
		f := one(t, fs, c.knob, c.target, c.p)
		if f.Current != c.cur || f.Status != c.st {
			t.Errorf("%s %s %s: got %q %s (%s), want %q %s", c.knob, c.target, c.p, f.Current, f.Status, f.Why, c.cur, c.st)
		}
		if f.Source == "" && f.Status != StatusNoRec {
			t.Errorf("%s: no source", c.knob)
		}
	}
	// br0 is neither a NIC nor a veth: not an offload target.
	for _, f := range fs {
		if strings.HasPrefix(f.Target, "br0") {
			t.Errorf("bridge audited: %+v", f)
		}
	}
	// bbr is not in tcp_available_congestion_control: audit says how to get it.
	if f := one(t, fs, "net.ipv4.tcp_congestion_control", "", Throughput); !strings.Contains(f.Why, "modprobe tcp_bbr") {
		t.Errorf("bbr availability not explained: %q", f.Why)
	}
}

func TestAuditVMFixtureCannotRead(t *testing.T) {
	e := fixtureEnv("testdata/vm")
	e.NIC = &fakeNIC{ringErr: unix.EOPNOTSUPP, drivers: map[string]string{"eth0": "virtio_net"}}
	fs := Audit(e, Knobs(), []Profile{Latency})
	cases := []struct{ knob, why string }{
		{"cpu.governor", "no cpufreq driver"},
		{"cpu.energy_perf_bias", "no energy_perf_bias"},
		{"cpu.intel_pstate.min_perf_pct", "no intel_pstate driver"},
		{"cpu.dma_latency", "cpu_dma_latency does not exist"},
		{"nic.rings", "driver does not support ring parameters"},
		{"irq.nic_affinity", "no MSI IRQs"},
		{"conntrack.max", "nf_conntrack is not loaded"},
		{"ovs.pmd-sleep-max", "Open vSwitch is not running"},
		{"net.core.busy_read", "busy_read does not exist"},
	}
	for _, c := range cases {
		got := find(fs, c.knob, "", Latency)
		if len(got) == 0 {
			t.Errorf("%s: no finding", c.knob)
			continue
		}
		f := got[0]
		if f.Status != StatusCannotRead || !strings.Contains(f.Why, c.why) {
			t.Errorf("%s: got %s %q, want cannot read with %q", c.knob, f.Status, f.Why, c.why)
		}
	}
	if f := one(t, fs, "vm.transparent_hugepages", "", Latency); f.Status != StatusOK || f.Current != "never" {
		t.Errorf("thp: %+v", f)
	}
	if f := one(t, fs, "cpu.flags.popcnt_sse4_2", "", Latency); f.Status != StatusDiffers || f.Current != "neither" {
		t.Errorf("cpu flags: %+v", f)
	}
}

// TestApplyRollbackFixture applies both profiles to a copy of the metal
// fixture and checks that rollback restores every file byte for byte.
func TestApplyRollbackFixture(t *testing.T) {
	root := copyTree(t, "testdata/metal")
	before := snapshot(t, root)
	e, nic := metalEnv(root)
	ringsBefore := nic.rings["eth0"]
	jdir := t.TempDir()

	rep, err := Apply(ApplyOptions{Env: e, Profile: Throughput, Knobs: Knobs(), JournalDir: jdir, ScopeLabel: "host"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() != 0 {
		t.Fatalf("failures: %+v", rep.Changes)
	}
	rep2, err := Apply(ApplyOptions{Env: e, Profile: Latency, Knobs: Knobs(), JournalDir: jdir, ScopeLabel: "host"})
	if err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, root)
	for path, want := range map[string]string{
		"/proc/sys/net/core/rmem_max":                           "1073741823",
		"/proc/sys/net/ipv4/tcp_rmem":                           "4096 131072 16777216",
		"/proc/sys/net/core/busy_poll":                          "50",
		"/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor": "performance",
		"/sys/kernel/mm/transparent_hugepage/enabled":           "never", // latency applied last
		"/proc/irq/40/smp_affinity":                             "00000001",
	} {
		if after[path] != want {
			t.Errorf("%s = %q after apply, want %q", path, after[path], want)
		}
	}
	if nic.rings["eth0"].RX != 4096 || !nic.features["eth0"]["rx-gro"].Active {
		t.Errorf("NIC not tuned: %+v %+v", nic.rings["eth0"], nic.features["eth0"])
	}
	// Audit-only knobs are reported, never written.
	var sawIrqbalance bool
	for _, s := range append(rep.Skipped, rep2.Skipped...) {
		if s.Knob == "irq.irqbalance" && strings.HasPrefix(s.Reason, "audit only") {
			sawIrqbalance = true
		}
	}
	if !sawIrqbalance {
		t.Error("irqbalance not reported as skipped")
	}
	js, err := Journals(jdir)
	if err != nil || len(js) != 2 || js[0].RolledBack || js[0].Changes == 0 || js[0].Unfinished != 0 {
		t.Fatalf("journals: %+v %v", js, err)
	}

	n, restored, err := RollbackAll(e, jdir)
	if err != nil || n != 2 || restored != len(rep.Changes)+len(rep2.Changes) {
		t.Fatalf("rollback: %d journals, %d values, %v", n, restored, err)
	}
	final := snapshot(t, root)
	for p, b := range before {
		if strings.HasSuffix(p, "transparent_hugepage/enabled") {
			// The kernel shows all modes with the active one bracketed; a
			// fixture file holds just the word written back.
			if bracketed(final[p]) != bracketed(b) {
				t.Errorf("%s: %q after rollback, want mode of %q", p, final[p], b)
			}
			continue
		}
		if final[p] != b {
			t.Errorf("%s: %q after rollback, want %q", p, final[p], b)
		}
	}
	if nic.rings["eth0"] != ringsBefore || nic.features["eth0"]["rx-gro"].Active {
		t.Errorf("NIC not restored: %+v %+v", nic.rings["eth0"], nic.features["eth0"])
	}
	js, _ = Journals(jdir)
	for _, j := range js {
		if !j.RolledBack {
			t.Errorf("%s not marked rolled back", j.Path)
		}
	}
	// A second rollback finds nothing to do.
	if n, _, err := RollbackAll(e, jdir); n != 0 || err != nil {
		t.Errorf("second rollback: %d journals, %v", n, err)
	}
	if _, err := Rollback(e, js[0].Path); !errors.Is(err, ErrRolledBack) {
		t.Errorf("rollback of a rolled-back journal: %v", err)
	}
}

// One knob failing does not stop the others, and is reported.
func TestApplyContinuesPastFailure(t *testing.T) {
	root := copyTree(t, "testdata/metal")
	e, _ := metalEnv(root)
	ks, _ := Select([]string{"net.core.busy_read", "net.core.busy_poll"})
	// A knob whose write fails (as a read-only sysctl would for root too).
	failing := *ks[0]
	failing.Write = func(*Env, string, string, bool) error { return errors.New("injected failure") }
	rep, err := Apply(ApplyOptions{Env: e, Profile: Latency, Knobs: []*Knob{&failing, ks[1]}, JournalDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Changes) != 2 || rep.Failed() != 1 || rep.Changes[0].Error == "" || rep.Changes[1].Error != "" {
		t.Fatalf("changes: %+v", rep.Changes)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "proc/sys/net/core/busy_poll")); string(b) != "50" {
		t.Errorf("busy_poll = %q, want 50", b)
	}
	js, _ := Journals(filepath.Dir(rep.Journal))
	if len(js) != 1 || js[0].Failed != 1 {
		t.Errorf("journal: %+v", js)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	root := copyTree(t, "testdata/metal")
	before := snapshot(t, root)
	e, _ := metalEnv(root)
	jdir := filepath.Join(t.TempDir(), "j")
	rep, err := Apply(ApplyOptions{Env: e, Profile: Latency, Knobs: Knobs(), JournalDir: jdir, DryRun: true})
	if err != nil || len(rep.Changes) == 0 || rep.Journal != "" {
		t.Fatalf("dry run: %+v %v", rep, err)
	}
	if _, err := os.Stat(jdir); !os.IsNotExist(err) {
		t.Errorf("dry run created the journal dir: %v", err)
	}
	after := snapshot(t, root)
	for p, b := range before {
		if after[p] != b {
			t.Errorf("dry run changed %s", p)
		}
	}
}

func TestTornJournalLine(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.jsonl")
	body := `{"type":"begin","id":"abcd","profile":"latency"}` + "\n" +
		`{"type":"change","seq":1,"knob":"net.core.busy_poll","old":"0\n","new":"50"}` + "\n" +
		`{"type":"change","seq":2,"kn`
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	es, err := ReadJournal(p)
	if err != nil || len(es) != 2 || es[1].Old != "0\n" {
		t.Fatalf("torn journal: %+v %v", es, err)
	}
	// A bad line in the middle is corruption, not a crash: refuse.
	if err := os.WriteFile(p, []byte(`{"type":"begin"}`+"\nxx\n"+`{"type":"change"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJournal(p); err == nil {
		t.Error("corrupt journal accepted")
	}
}

func TestCPUMask(t *testing.T) {
	for cpu, want := range map[int]string{0: "00000001", 3: "00000008", 31: "80000000", 32: "00000001,00000000", 33: "00000002,00000000"} {
		if got := cpuMask(cpu); got != want {
			t.Errorf("cpuMask(%d) = %s, want %s", cpu, got, want)
		}
	}
}

func TestSelectUnknown(t *testing.T) {
	if _, err := Select([]string{"net.core.rmem_max", "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown knob: %v", err)
	}
}

func TestRegistryComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Knobs() {
		if seen[k.ID] {
			t.Errorf("duplicate id %s", k.ID)
		}
		seen[k.ID] = true
		if k.Title == "" || k.Access == "" || k.Risk == "" || k.Read == nil || k.Scope == "" {
			t.Errorf("%s: incomplete entry", k.ID)
		}
		if !k.AuditOnly && k.Write == nil && len(k.Recs) > 0 {
			t.Errorf("%s: has recommendations but no Write and is not audit-only", k.ID)
		}
		for p, r := range k.Recs {
			if r.Source == "" {
				t.Errorf("%s %s: recommendation without source", k.ID, p)
			}
		}
	}
	for _, id := range []string{"cpu.governor", "cpu.energy_perf_bias", "cpu.intel_pstate.min_perf_pct", "cpu.dma_latency",
		"irq.irqbalance", "irq.nic_affinity", "nic.rings", "nic.offloads", "net.core.rmem_max", "net.core.wmem_max",
		"net.core.rmem_default", "net.core.wmem_default", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
		"net.core.netdev_max_backlog", "net.core.busy_read", "net.core.busy_poll", "net.ipv4.tcp_fastopen",
		"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat", "net.core.somaxconn",
		"net.core.default_qdisc", "net.ipv4.tcp_congestion_control", "conntrack.max", "conntrack.hashsize",
		"vm.transparent_hugepages", "kernel.numa_balancing", "kernel.timer_migration", "mtu.consistency",
		"cpu.flags.popcnt_sse4_2", "ovs.datapath_type", "ovs.pmd-cpu-mask", "ovs.pmd-sleep-max",
		"ovs.userspace-tso-enable", "kube-proxy.rules"} {
		if !seen[id] {
			t.Errorf("knob %s missing from the registry", id)
		}
	}
}

func TestMTUCheck(t *testing.T) {
	e := fixtureEnv("testdata/vm")
	e.LabNetns = []string{"cnb-x-pod"}
	e.Links = fakeLinks{
		"": {
			{Name: "eth0", Kind: "device", MTU: 1500},
			{Name: "vx0", Kind: "vxlan", MTU: 1500, Underlay: "eth0", UnderlayMTU: 1500},
			{Name: "gn0", Kind: "geneve", MTU: 1450, Underlay: "eth0", UnderlayMTU: 1500},
		},
		"cnb-x-pod": {{Netns: "cnb-x-pod", Name: "lo", Kind: "device", MTU: 65536}, {Netns: "cnb-x-pod", Name: "eth0", Kind: "veth", MTU: 1500}},
	}
	fs := Audit(e, []*Knob{mtuKnob()}, []Profile{Latency})
	want := map[string]Status{"vx0": StatusDiffers, "gn0": StatusOK, "cnb-x-pod/eth0": StatusDiffers}
	if len(fs) != len(want) {
		t.Fatalf("findings: %+v", fs)
	}
	for _, f := range fs {
		if want[f.Target] != f.Status {
			t.Errorf("%s: %s (%s), want %s", f.Target, f.Status, f.Current, want[f.Target])
		}
	}
}

type fakeLinks map[string][]LinkInfo

func (f fakeLinks) Links(ns string) ([]LinkInfo, error) {
	l, ok := f[ns]
	if !ok {
		return nil, fmt.Errorf("no netns %q", ns)
	}
	for i := range l {
		l[i].Netns = ns
	}
	return l, nil
}
