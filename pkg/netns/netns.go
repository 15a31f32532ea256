// Package netns is the only place in cnibench that switches network
// namespaces. Everything else names a namespace and asks this package to run
// code, a netlink handle or a command inside it.
//
// Named namespaces live at /run/netns/<name>, the same place `ip netns` uses,
// so a user can inspect a lab with `ip netns exec`.
package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	vns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Dir is where named namespaces are bind-mounted.
const Dir = "/run/netns"

// Path returns the bind-mount path of a named namespace.
func Path(name string) string { return filepath.Join(Dir, name) }

// Exists reports whether the named namespace exists.
func Exists(name string) bool {
	_, err := os.Stat(Path(name))
	return err == nil
}

// Create makes a new named namespace, like `ip netns add NAME`, and brings its
// loopback up. The calling goroutine's namespace is not changed.
func Create(name string) error {
	if Exists(name) {
		return fmt.Errorf("create netns %q: already exists", name)
	}
	err := onLockedThread(func() error {
		orig, err := vns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		h, err := vns.NewNamed(name) // unshares this thread into the new namespace
		if err != nil {
			return err
		}
		defer h.Close()
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if serr := vns.Set(orig); serr != nil {
			return fmt.Errorf("return to original netns: %w", serr)
		}
		return err
	})
	if err != nil {
		_ = Delete(name)
		return fmt.Errorf("create netns %q: %w", name, err)
	}
	return nil
}

// Delete removes a named namespace, like `ip netns del NAME`. A namespace that
// does not exist is not an error, so deleting twice is fine.
func Delete(name string) error {
	if !Exists(name) {
		return nil
	}
	err := vns.DeleteNamed(name)
	if errors.Is(err, unix.EINVAL) {
		// Not a mount point: a Create killed between making the file and
		// bind-mounting the namespace on it. Only the file is left.
		err = os.Remove(Path(name))
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %q: %w", name, err)
	}
	return nil
}

// List returns the named namespaces whose names start with prefix.
func List(prefix string) ([]string, error) {
	ents, err := os.ReadDir(Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) { // none there: an empty list
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Do runs fn on an OS thread that has joined the named namespace. The thread
// is never returned to the Go scheduler: it exits with the goroutine, so a
// failure to switch back cannot leak a namespace into unrelated goroutines.
func Do(name string, fn func() error) error {
	return onLockedThread(func() error {
		h, err := vns.GetFromName(name)
		if err != nil {
			return fmt.Errorf("open netns %q: %w", name, err)
		}
		defer h.Close()
		if err := vns.Set(h); err != nil {
			return fmt.Errorf("enter netns %q: %w", name, err)
		}
		return fn()
	})
}

// onLockedThread runs fn in a fresh goroutine locked to its thread and waits.
// It deliberately never calls UnlockOSThread (see Do).
func onLockedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- fn()
	}()
	return <-errc
}

// Handle returns a netlink handle that operates inside the named namespace
// without switching the calling thread (netlink.NewHandleAt). An empty name
// gives a handle in the caller's namespace, as Start does.
func Handle(name string) (*netlink.Handle, error) {
	if name == "" {
		return netlink.NewHandle()
	}
	h, err := vns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open netns %q: %w", name, err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %q: %w", name, err)
	}
	return nh, nil
}

// Start starts cmd inside the named namespace. The child is forked from a
// thread that has joined the namespace, so it inherits it, the way
// `ip netns exec` would run it (without the /sys remount). An empty name
// starts cmd in the caller's namespace.
func Start(name string, cmd *exec.Cmd) error {
	if name == "" {
		return cmd.Start()
	}
	return Do(name, cmd.Start)
}

// Exec replaces the calling process with argv (a path and its arguments)
// running inside the named namespace, as `ip netns exec` does: the command
// keeps cnibench's pid, so every signal sent to it (SIGTERM from a
// supervisor, SIGHUP from a closing terminal) reaches the command itself and
// its exit status is the caller's. It returns only on failure.
func Exec(name string, argv, env []string) error {
	return Do(name, func() error {
		// The new image inherits this thread's namespaces: the kernel
		// ends every other thread of the process at execve.
		if err := unix.Exec(argv[0], argv, env); err != nil {
			return fmt.Errorf("exec %s in netns %q: %w", argv[0], name, err)
		}
		return nil
	})
}

// Command is exec.CommandContext for a command that will run inside the named
// namespace; start it with Start.
func Command(ctx context.Context, argv ...string) *exec.Cmd {
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// Pids lists the processes living in the named namespace: those whose
// /proc/<pid>/ns/net is the same namespace (device and inode) as
// /run/netns/<name>. A process that ends while it is read is skipped.
func Pids(name string) ([]int, error) {
	var want unix.Stat_t
	if err := unix.Stat(Path(name), &want); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil // gone meanwhile: nothing lives in it
		}
		return nil, fmt.Errorf("netns %q: %w", name, err)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/net", &st) != nil {
			continue
		}
		if st.Dev == want.Dev && st.Ino == want.Ino {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// KillAll SIGKILLs every process in the named namespace and waits (up to
// wait) until they are gone. A namespace whose processes outlived the
// cnibench that started them (SIGKILL leaves its children running) can only
// really be removed this way: unmounting it would leave it alive, unnamed,
// behind them. It returns how many it killed.
func KillAll(name string, wait time.Duration) (int, error) {
	pids, err := Pids(name)
	if err != nil || len(pids) == 0 {
		return 0, err
	}
	for _, p := range pids {
		_ = unix.Kill(p, unix.SIGKILL)
	}
	deadline := time.Now().Add(wait)
	for {
		left, err := Pids(name)
		if err != nil || len(left) == 0 {
			return len(pids), err
		}
		if time.Now().After(deadline) {
			return len(pids), fmt.Errorf("netns %q: %d process(es) still running after SIGKILL, e.g. pid %d", name, len(left), left[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
