package profile

import (
	"strings"
	"testing"
)

// Before: the core kernel and one Cilium program. After: a pod started and
// its program was JITed just above the first one.
const (
	symsBefore = "ffffffff81000000 T _stext\nffffffff81001000 t __netif_receive_skb_core.constprop.0\nffffffff81002000 T _etext\n" +
		"ffffffffc0001000 t bpf_prog_046749992058f144_cil_from_container\t[bpf]\n"
	symsAfter = symsBefore + "ffffffffc0005000 t bpf_prog_3c3b4c12a0d0e3f1_tail_handle_ipv4\t[bpf]\n"
)

func TestVolatile(t *testing.T) {
	s, err := ParseKallsyms(strings.NewReader(symsBefore))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[uint64]bool{
		0xffffffff81001010: false, // core text never moves
		0xffffffffc0001010: true,  // in a JITed program
		0xffffffffc0009000: true,  // past every symbol: whatever was loaded there since
		0xffffffff81002000: false,
	} {
		if got := s.Volatile(addr); got != want {
			t.Errorf("Volatile(%#x) = %v, want %v", addr, got, want)
		}
	}
}

func TestRawKeyRoundTrip(t *testing.T) {
	chain := []uint64{k(perfContextKernel), 0xffffffffc0005010, 0xffffffff81001010, k(perfContextUser), 0x401000}
	comm, pid, ip, got := parseRawKey(rawKey("iperf3", 42, 0xffffffffc0005010, chain))
	if comm != "iperf3" || pid != 42 || ip != 0xffffffffc0005010 || len(got) != len(chain) || got[1] != chain[1] || got[4] != 0x401000 {
		t.Errorf("got %q %#x %x", comm, ip, got)
	}
	if comm, pid, ip, got := parseRawKey(rawKey("x", 0, 7, nil)); comm != "x" || pid != 0 || ip != 7 || len(got) != 0 {
		t.Errorf("no chain: %q %d %v", comm, ip, got)
	}
}

// TestFoldWindowReadsNewPrograms: a program JITed after the table was read
// is named by a fresh table, not as the program before it (what a table
// read once per process did); a window in core text alone reads nothing.
func TestFoldWindowReadsNewPrograms(t *testing.T) {
	before, _ := ParseKallsyms(strings.NewReader(symsBefore))
	chain := []uint64{k(perfContextKernel), 0xffffffffc0005010, 0xffffffff81001010}
	raw := map[string]uint64{rawKey("swapper", 0, 0, chain): 3}
	reads := 0
	refresh := func() (*Symbols, error) { reads++; return ParseKallsyms(strings.NewReader(symsAfter)) }

	stale, _ := foldWindow(raw, before, nil, nil)
	if _, ok := stale["swapper;__netif_receive_skb_core.constprop.0;bpf_prog_046749992058f144_cil_from_container"]; !ok {
		t.Fatalf("without a refresh the stale table should name the neighbour; got %v", stale)
	}
	fresh, used := foldWindow(raw, before, refresh, nil)
	if fresh["swapper;__netif_receive_skb_core.constprop.0;bpf_prog_3c3b4c12a0d0e3f1_tail_handle_ipv4"] != 3 || reads != 1 {
		t.Errorf("refreshed: %v after %d reads", fresh, reads)
	}
	if used == before {
		t.Error("the fresh table is not kept for the next window")
	}
	core := map[string]uint64{rawKey("cnibench", 1, 0, []uint64{k(perfContextKernel), 0xffffffff81001010}): 1}
	if st, _ := foldWindow(core, before, refresh, nil); reads != 1 || st["cnibench;__netif_receive_skb_core.constprop.0"] != 1 {
		t.Errorf("core-only window: %v, %d reads", st, reads)
	}
}

// k turns a PERF_CONTEXT_* marker into the word the kernel writes.
func k(v int64) uint64 { return uint64(v) }
