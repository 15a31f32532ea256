// Package netns is the only place in cnibench that switches network
// namespaces. Everything else names a namespace and asks this package to run
// code, a netlink handle or a command inside it.
//
// Named namespaces live at /run/netns/<name>, the same place `ip netns` uses,
// so a user can inspect a lab with `ip netns exec`.
package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
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
	if err := ensureSharedDir(Dir); err != nil {
		return fmt.Errorf("create netns %q: %w", name, err)
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

// ensureSharedDir makes dir a shared mount point before a namespace is
// mounted in it, exactly as iproute2's `ip netns add` (and the CNI plugins'
// ns package) do: make it shared, and if it is not a mount point yet, bind it
// onto itself first. Were cnibench to mount its namespaces on a plain
// directory, the first `ip netns add` of any other tool would bind the
// directory over them, leaving them unreachable by path and impossible to
// delete (see Shadowed). Making it shared again when it already is changes
// nothing, so this runs before every Create rather than trusting a flag that
// another tool's `umount` could have made stale.
func ensureSharedDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("make %s a shared mount: %w", dir, err)
	}
	// EINVAL: not a mount point. MS_REC carries over namespaces that tools
	// which skip this step already mounted there.
	if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s onto itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s a shared mount: %w", dir, err)
	}
	return nil
}

// ErrShadowed is returned (wrapped) by Delete for a namespace whose mount
// lies beneath a later mount of Dir: see Shadowed.
var ErrShadowed = errors.New("mount hidden beneath a later mount of " + Dir)

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
	if errors.Is(err, unix.EBUSY) {
		if sh, serr := Shadowed(name); serr == nil && sh != nil {
			return fmt.Errorf("delete netns %q: %w: %s", name, ErrShadowed, sh)
		}
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
// An empty name runs fn in the caller's namespace, as Start and Handle take
// it: code that runs in a lab's namespace and in a pod's own (the disruption
// probes) needs no second path.
func Do(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	return onLockedThread(func() error {
		if err := join(name); err != nil {
			return err
		}
		return fn()
	})
}

// join moves the calling (locked) thread into the named namespace.
func join(name string) error {
	h, err := vns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("open netns %q: %w", name, err)
	}
	defer h.Close()
	if err := vns.Set(h); err != nil {
		return fmt.Errorf("enter netns %q: %w", name, err)
	}
	return nil
}

// onLockedThread runs fn in a fresh goroutine locked to its thread and waits.
// The thread normally exits with the goroutine (no UnlockOSThread, see Do).
// The process's main thread cannot exit: Go parks it for good instead, still
// in the namespace (and on the CPU) fn left it in, and /proc/self — the main
// thread's view, /proc/self/net included — would show a lab's namespace for
// the rest of the process (CI's TestPortBoundOwnProtocolOnly saw neither of
// its own sockets there). So on the main thread its namespace and affinity
// are put back and the thread returned; if that fails it is parked as before.
func onLockedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			errc <- fn()
			return
		}
		orig, err := vns.Get()
		if err != nil {
			errc <- fmt.Errorf("open this thread's netns: %w", err)
			return
		}
		defer orig.Close()
		var cpus unix.CPUSet
		if err := unix.SchedGetaffinity(0, &cpus); err != nil {
			errc <- fmt.Errorf("read this thread's CPUs: %w", err)
			return
		}
		err = fn()
		if vns.Set(orig) == nil && unix.SchedSetaffinity(0, &cpus) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
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

// StartOn is Start with the child's CPU affinity set to cpu alone. The
// forking thread is pinned, in the same locked thread that joined the
// namespace, so the child and every thread it ever starts inherit the
// affinity from their first instruction; pinning a different thread than
// the one that forks (Do runs fn on a fresh one) would pin nothing.
func StartOn(name string, cpu int, cmd *exec.Cmd) error {
	return onLockedThread(func() error {
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			return fmt.Errorf("pin to CPU %d: %w", cpu, err)
		}
		if name != "" {
			if err := join(name); err != nil {
				return err
			}
		}
		return cmd.Start()
	})
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
func Pids(name string) ([]int, error) { return PidsIn(name) }

// PidsIn is Pids for several namespaces in one pass over /proc (a lab's
// hundred namespaces would otherwise read /proc a hundred times).
// Namespaces already gone are skipped: nothing lives in them.
func PidsIn(names ...string) ([]int, error) {
	type key struct{ dev, ino uint64 }
	want := map[key]bool{}
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Stat(Path(name), &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return nil, fmt.Errorf("netns %q: %w", name, err)
		}
		want[key{st.Dev, st.Ino}] = true
	}
	if len(want) == 0 {
		return nil, nil
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
		if want[key{st.Dev, st.Ino}] {
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
func KillAll(name string, wait time.Duration) (int, error) { return KillAllIn(wait, name) }

// KillAllIn is KillAll for several namespaces at once.
func KillAllIn(wait time.Duration, names ...string) (int, error) {
	pids, err := PidsIn(names...)
	if err != nil || len(pids) == 0 {
		return 0, err
	}
	for _, p := range pids {
		_ = unix.Kill(p, unix.SIGKILL)
	}
	deadline := time.Now().Add(wait)
	for {
		left, err := PidsIn(names...)
		if err != nil || len(left) == 0 {
			return len(pids), err
		}
		if time.Now().After(deadline) {
			return len(pids), fmt.Errorf("netns %s: %d process(es) still running after SIGKILL, e.g. pid %d", strings.Join(names, ", "), len(left), left[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Shadow is a named namespace whose mount cannot be reached by path: it was
// mounted on Dir while Dir was a plain directory, and another tool then bound
// Dir onto itself (iproute2 does so before its first namespace), so the path
// now leads into that later mount. The namespace lives on, pinned by the
// hidden mount, and its file cannot be removed (EBUSY).
type Shadow struct {
	Name string
	// MountID is the hidden nsfs mount, Over the mount of Dir above it
	// (both as in /proc/self/mountinfo).
	MountID, Over int
}

func (s *Shadow) String() string {
	return fmt.Sprintf("its mount (id %d) lies beneath mount %d of %s, which another tool bound over it "+
		"after cnibench created it, so nothing can reach it by path; free it with `umount %s && cnibench lab clean` "+
		"once no other tool's namespace lives in %s", s.MountID, s.Over, Dir, Dir, Dir)
}

// Shadowed reports whether the named namespace's mount is hidden (nil if it
// is reachable or not mounted at all).
func Shadowed(name string) (*Shadow, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, Dir, 0, unix.STATX_MNT_ID, &st); err != nil {
		return nil, fmt.Errorf("statx %s: %w", Dir, err)
	}
	if st.Mask&unix.STATX_MNT_ID == 0 {
		return nil, fmt.Errorf("statx %s: kernel gives no mount id", Dir)
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mounts, err := parseMountinfo(f)
	if err != nil {
		return nil, err
	}
	return shadowedIn(mounts, Path(name), int(st.Mnt_id)), nil
}

// shadowedIn finds a mount at path whose parent is not top, the mount that
// path's directory resolves to now.
func shadowedIn(mounts []mountInfo, path string, top int) *Shadow {
	for _, m := range mounts {
		if m.point == path && m.parent != top {
			return &Shadow{Name: filepath.Base(path), MountID: m.id, Over: top}
		}
	}
	return nil
}

type mountInfo struct {
	id, parent int
	point      string
}

// parseMountinfo reads the fields Shadowed needs from /proc/PID/mountinfo
// (proc(5)): mount id, parent id and the mount point, octal escapes undone.
func parseMountinfo(r io.Reader) ([]mountInfo, error) {
	var out []mountInfo
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			return nil, fmt.Errorf("mountinfo: short line %q", sc.Text())
		}
		id, err1 := strconv.Atoi(f[0])
		parent, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mountinfo: bad ids in %q", sc.Text())
		}
		out = append(out, mountInfo{id: id, parent: parent, point: unescapeOctal(f[4])})
	}
	return out, sc.Err()
}

// unescapeOctal undoes mountinfo's \ooo escapes (space, tab, newline, \).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
