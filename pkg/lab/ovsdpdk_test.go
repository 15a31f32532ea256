package lab

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDPDKKnobs(t *testing.T) {
	s, err := Preset(TopoOVSDPDK)
	if err != nil {
		t.Fatal(err)
	}
	if s.DPDK == nil || s.DPDK.Hugepages != dpdkDefaultHugepages || s.DPDK.PMDSleepUs != 0 || s.Nodes != 1 {
		t.Fatalf("preset defaults: %+v %+v", s, s.DPDK)
	}
	s, err = Resolve(TopoOVSDPDK, "", map[string]string{"pmd_cpus": "0,2-3", "pmd_sleep": "500", "userspace_tso": "on", "hugepages": "300", "ring_frames": "2048"})
	if err != nil {
		t.Fatal(err)
	}
	want := DPDKSpec{PMDCPUs: []int{0, 2, 3}, PMDSleepUs: 500, UserspaceTSO: true, Hugepages: 300, RingFrames: 2048}
	if !reflect.DeepEqual(*s.DPDK, want) {
		t.Errorf("spec %+v, want %+v", *s.DPDK, want)
	}
	// The values these knobs refuse are checked in TestSetRefuses.

	// What the lab cannot build is refused before anything is made.
	for k, v := range map[string]string{"mtu": "9000", "services": "2", "conntrack": "on"} {
		if _, err := Resolve(TopoOVSDPDK, "", map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s on ovs-dpdk: want an error naming it, got %v", k, v, err)
		}
	}
}

func TestCPUMask(t *testing.T) {
	for in, want := range map[string]string{"1": "0x2", "0": "0x1", "0-1": "0x3", "0,2-3": "0xd", "4": "0x10", "1,8": "0x102", "63": "0x8000000000000000"} {
		cpus, err := parseCPUList(in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := cpuMask(cpus); got != want {
			t.Errorf("cpuMask(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestParsePMDBusy(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "pmd-stats-show.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := parsePMDBusy(string(b))
	if err != nil {
		t.Fatal(err)
	}
	// 553063 processing of 553063+5297367 cycles; the main thread is not a PMD.
	if want := 100 * 553063.0 / (553063 + 5297367); got < want-1e-9 || got > want+1e-9 {
		t.Errorf("busy %v%%, want %v%%", got, want)
	}
	if _, err := parsePMDBusy("main thread:\n  idle cycles: 5 (100%)\n"); !errors.Is(err, errNoPMDCycles) {
		t.Errorf("no PMD thread: %v", err)
	}
}

func TestDPDKFailedOneLine(t *testing.T) {
	dir := t.TempDir()
	log := "2026-11-25T06:02:59.967Z|00052|dpdk|INFO|EAL: Detected CPU lcores: 2\n" +
		"2026-11-25T06:02:59.968Z|00053|dpdk|ERR|EAL: Cannot get hugepage information.\n" +
		"2026-11-25T06:02:59.969Z|00054|dpdk|EMER|Unable to initialize DPDK: Permission denied\n"
	if err := os.WriteFile(filepath.Join(dir, "ovs-vswitchd.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	err := privOVS{dir: dir}.dpdkFailed(errors.New("ovs-vswitchd-dpdk: exit status 1"))
	if !errors.Is(err, ErrNotSupported) {
		t.Errorf("not ErrNotSupported: %v", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "Unable to initialize DPDK: Permission denied") || !strings.Contains(msg, dpdkInstall) {
		t.Errorf("want one line quoting the log's last error and naming the package: %q", msg)
	}
}
