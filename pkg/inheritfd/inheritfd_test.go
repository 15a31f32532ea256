package inheritfd

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestChildInheritsNothing: a descriptor opened without close-on-exec (as
// flock(1) leaves its lock) reaches a child before CloseOnExec and not
// after; exec.Cmd's ExtraFiles still reach it.
func TestChildInheritsNothing(t *testing.T) {
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	childHas := func() bool {
		cmd := exec.Command("sh", "-c", `for f in /proc/self/fd/*; do echo "${f##*/} $(readlink "$f")"; done`)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, strconv.Itoa(fd)+" ") {
				return true
			}
		}
		return false
	}
	if !childHas() {
		t.Fatalf("descriptor %d without close-on-exec did not reach the child: the test proves nothing", fd)
	}
	if err := CloseOnExec(); err != nil {
		t.Fatal(err)
	}
	if childHas() {
		t.Errorf("descriptor %d still reaches a child after CloseOnExec", fd)
	}
	// A file handed over on purpose becomes the child's fd 3.
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sh", "-c", "readlink /proc/self/fd/3")
	cmd.ExtraFiles = []*os.File{f}
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != os.DevNull {
		t.Errorf("ExtraFiles no longer reach the child: %q %v", out, err)
	}
}
