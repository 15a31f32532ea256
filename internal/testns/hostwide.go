package testns

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// HostWideLock is the file privileged tests lock while they change (or read
// and compare) host-wide settings — net.core.rmem_max/wmem_max,
// vm.nr_hugepages, the host's Open vSwitch. `go test ./...` runs packages
// in parallel; without it one package's lab raised rmem_max while another's
// test read its "before" value or waited for its own raise (seen in
// TestPrivRunKilledRestoresRmemMax while pkg/lab's tests ran).
const HostWideLock = "/run/cnibench-test-hostwide.lock"

// HostWide holds HostWideLock until t ends. Call it first in a test that
// changes a host-wide setting, before reading any value to compare with.
func HostWide(t testing.TB) {
	t.Helper()
	NeedRoot(t)
	f, err := os.OpenFile(HostWideLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("host-wide test lock: %v", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("host-wide test lock: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // closing the file releases the lock
}
