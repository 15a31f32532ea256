// Package inheritfd keeps the file descriptors cnibench inherited from its
// caller out of the processes it starts.
//
// Go opens its own files close-on-exec, but descriptors a caller leaves open
// (flock(1)'s lock, a test harness's pipe, a shell's redirections) are
// passed on to every child. Most children exit with the command; the
// daemons a lab starts (ovs-ctl's ovsdb-server and ovs-vswitchd, OVN's)
// outlive it, and a daemon holding `flock /tmp/lock cnibench …`'s lock
// holds it until the daemon is restarted: every later command waiting on
// that lock waits forever. A daemon holding the write end of a caller's
// pipe likewise keeps `out=$(cnibench …)` from ever returning.
package inheritfd

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseOnExec marks every descriptor above standard error close-on-exec,
// so this process still uses them but no child it starts inherits them.
// Descriptors handed to a child on purpose (exec.Cmd's ExtraFiles) are
// duplicated for it at fork time and unaffected.
func CloseOnExec() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list inherited descriptors: %w", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		// The directory's own descriptor is closed by now (EBADF); any
		// other failure leaves that descriptor as it was, which is no
		// reason not to run.
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
	return nil
}
