package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/cnibench/cnibench/pkg/tune"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// teardown removes what the state says may exist. Everything not found is
// fine: a half-built lab has only some of it.
func (l *Lab) teardown(ctx context.Context) error {
	var errs []error
	// Private OVS daemons first: a process inside a namespace would keep
	// it (and its links) alive after the bind mount is gone.
	if len(l.PrivateOVS) > 0 {
		if err := stopPrivOVS(l.PrivateOVS...); err != nil {
			errs = append(errs, err)
		}
	}
	if len(l.OVSBridges) > 0 && hostOVSRunning() {
		for _, br := range l.OVSBridges {
			if err := hostSwitch().DelBridge(ctx, br); err != nil {
				errs = append(errs, fmt.Errorf("open vswitch: %w", seeLog(err, hostVswitchdLog)))
			}
		}
	}
	// Then whatever else still runs inside (a server started with `lab
	// exec`, a killed run's tools): deleting the bind mount would not stop
	// it, and the namespace would live on unnamed around it.
	if _, err := netns.KillAllIn(3*time.Second, l.Namespaces...); err != nil {
		errs = append(errs, err)
	}
	if err := each(context.WithoutCancel(ctx), l.Namespaces, netns.Delete); err != nil {
		errs = append(errs, err)
	}
	for _, name := range l.HostLinks {
		if err := delHostLink(name); err != nil {
			errs = append(errs, err)
		}
	}
	// Settings last: by now most of them went with their namespaces and
	// links, and rollback counts those as restored without touching them.
	if err := l.rollbackJournal(); err != nil {
		errs = append(errs, err)
	}
	if l.StartedOVS {
		if err := stopHostOVS(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop open vswitch: %w", err))
		}
	}
	return errors.Join(errs...)
}

// cleanJournals rolls back and removes the lab journals (named
// <time>-<id>.jsonl) of the ids match accepts. A journal whose rollback
// fails stays, for the next clean.
func cleanJournals(match func(id string) bool) (removed []string, errs []error) {
	ents, err := os.ReadDir(journalDir())
	if err != nil {
		return nil, nil
	}
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || e.IsDir() {
			continue
		}
		id := base[strings.LastIndex(base, "-")+1:]
		if !runid.Valid(id) || !match(id) {
			continue
		}
		p := filepath.Join(journalDir(), e.Name())
		n, err := tune.Rollback(tune.DefaultEnv(), p)
		if err != nil && !errors.Is(err, tune.ErrRolledBack) {
			errs = append(errs, fmt.Errorf("lab journal %s: %w", p, err))
			continue
		}
		if err := os.Remove(p); err == nil {
			removed = append(removed, fmt.Sprintf("journal %s (%d settings restored)", e.Name(), n))
		}
	}
	return removed, errs
}

func delHostLink(name string) error {
	lk, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("find link %s: %w", name, err)
	}
	if err := netlink.LinkDel(lk); err != nil {
		// Gone in between: deleting a pod's namespace takes its veth
		// peer with it, asynchronously.
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return nil
		}
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}

// Clean removes every lab and everything named cnb-* that a killed run may
// have left: labs with state files (through Down, which also rolls back the
// settings its journal holds and stops daemons it started), then any lab
// journal still holding a change, cnb-* namespace, link in the host
// namespace, nftables table, OVS bridge, private OVS instance and stray
// state file. It returns what it removed.
func Clean(ctx context.Context) ([]string, error) {
	return clean(ctx, func(string) bool { return true }, true)
}

// CleanID is Clean restricted to the objects of one run id (the 4
// characters after "cnb-"): labs, namespaces, links, bridges and tables.
func CleanID(ctx context.Context, id string) ([]string, error) {
	if !runid.Valid(id) {
		return nil, fmt.Errorf("run id %q: want 4 characters [a-z0-9], as in cnb-<id>-…", id)
	}
	return clean(ctx, func(x string) bool { return x == id }, false)
}

// clean is Clean restricted to run ids for which match is true; tests use it
// so they never remove what a parallel test created.
func clean(ctx context.Context, match func(id string) bool, all bool) ([]string, error) {
	var removed []string
	var errs []error
	// A lab whose builder still runs — a `cnibench run` measuring beside
	// this clean, on a machine other people and jobs share — is not a
	// leftover: its run id is left alone, and the error names the process.
	if live := liveOwners(); len(live) > 0 {
		for id, l := range live {
			if match(id) {
				errs = append(errs, fmt.Errorf("lab %s (run id %s): %w: process %d (%s) that built it still runs; stop it (or let it finish), then run `cnibench lab clean` again", l.Name, id, ErrOwnerRunning, l.PID, procComm(l.PID)))
			}
		}
		inner := match
		match = func(id string) bool { _, ok := live[id]; return !ok && inner(id) }
	}
	// Processes first: a cnibench killed mid-measurement leaves its server
	// and tool children running inside the lab's namespaces, where they
	// would keep each namespace (and the host state it pins) alive.
	if nss, err := netns.List(runid.Prefix); err == nil {
		for _, ns := range nss {
			if id, _, ok := runid.Parse(ns); !ok || !match(id) {
				continue
			}
			n, err := netns.KillAll(ns, 3*time.Second)
			if err != nil {
				errs = append(errs, err)
			}
			if n > 0 {
				removed = append(removed, fmt.Sprintf("%d process(es) in netns %s", n, ns))
			}
		}
	}
	labs, err := List()
	if err != nil {
		// A corrupt state file must not stop the sweep below.
		errs = append(errs, err)
	}
	for _, l := range labs {
		if !match(l.ID) {
			continue
		}
		held, _ := l.Changes()
		if err := l.Down(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		what := "lab " + l.Name
		if len(held) > 0 {
			what += fmt.Sprintf(" (%d settings its journal held restored)", len(held))
		}
		removed = append(removed, what)
	}
	ours := func(name string) bool {
		id, _, ok := runid.Parse(name)
		return ok && match(id)
	}
	failed := map[string]bool{} // names whose removal failed (their error says why)
	// Journals no readable state file points to (a kill between a journal's
	// creation and the state write that records it, a corrupt state file,
	// a Down that failed): roll back what they still hold, by their id.
	r, jerrs := cleanJournals(match)
	removed, errs = append(removed, r...), append(errs, jerrs...)
	// Private OVS instances before namespaces (their daemons pin them).
	if ents, err := os.ReadDir(privOVSRoot); err == nil {
		for _, e := range ents {
			if ours(e.Name()) {
				if err := stopPrivOVS(filepath.Join(privOVSRoot, e.Name())); err != nil {
					errs = append(errs, err)
				} else {
					removed = append(removed, "ovs instance "+e.Name())
				}
			}
		}
	}
	// DPDK runtime directories whose lab directory is already gone.
	if ents, err := os.ReadDir(dpdkRunDir); err == nil {
		for _, e := range ents {
			if ours(e.Name()) {
				if err := os.RemoveAll(filepath.Join(dpdkRunDir, e.Name())); err != nil {
					errs = append(errs, err)
				} else {
					removed = append(removed, "dpdk runtime directory "+e.Name())
				}
			}
		}
	}
	if hostOVSRunning() {
		r, oerrs := cleanHostOVS(ctx, ours)
		removed, errs = append(removed, r...), append(errs, oerrs...)
	}
	nss, err := netns.List(runid.Prefix)
	if err != nil {
		errs = append(errs, err)
	}
	for _, ns := range nss {
		if !ours(ns) {
			continue
		}
		if err := netns.Delete(ns); err != nil {
			errs = append(errs, err)
			failed[ns] = true
		} else {
			removed = append(removed, "netns "+ns)
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		errs = append(errs, err)
	}
	for _, lk := range links {
		if n := lk.Attrs().Name; ours(n) {
			if err := delHostLink(n); err != nil {
				errs = append(errs, err)
				failed[n] = true
			} else {
				removed = append(removed, "link "+n)
			}
		}
	}
	if c, err := nftables.New(); err == nil {
		tables, err := c.ListTables()
		if err == nil {
			for _, t := range tables {
				if ours(t.Name) {
					c.DelTable(t)
					removed = append(removed, "nft table "+t.Name)
				}
			}
			if err := c.Flush(); err != nil {
				errs = append(errs, fmt.Errorf("delete nft tables: %w", err))
			}
		}
	}
	// Reservation files of an `up` killed before its first state write,
	// and (full clean only) state files too corrupt to read.
	if ents, err := os.ReadDir(StateDir); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				continue // the journal directory
			}
			p := filepath.Join(StateDir, e.Name())
			n := strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".tmp"), ".json")
			l, gerr := Get(n)
			fi, err := e.Info()
			if err != nil {
				continue
			}
			stray := strings.HasSuffix(e.Name(), ".tmp") || fi.Size() == 0
			corrupt := gerr != nil && !errors.Is(gerr, ErrNoLab) // unreadable: no Down possible
			if stray || (corrupt && all) {
				// A reservation (or a temporary file) holds only its name,
				// <anything>-<id>: its id decides under --id.
				nameID := n[strings.LastIndex(n, "-")+1:]
				if (gerr == nil && !match(l.ID)) || (gerr != nil && !all && !(stray && runid.Valid(nameID) && match(nameID))) {
					continue
				}
				if err := os.Remove(p); err == nil {
					removed = append(removed, "state file "+e.Name())
				}
			}
		}
	}
	errs = append(errs, remaining(ours, failed)...)
	left := map[string]bool{} // run ids with a namespace still there
	if nss, err := netns.List(runid.Prefix); err == nil {
		for _, ns := range nss {
			if id, _, ok := runid.Parse(ns); ok {
				left[id] = true
			}
		}
	}
	removed = append(removed, cleanDisruptJournals(disruptJournalDir(), func(id string) bool { return match(id) && !left[id] })...)
	return removed, errors.Join(errs...)
}

// disruptJournalDir is where `cnibench disrupt run` keeps its journals
// (pkg/disrupt), beside StateDir.
func disruptJournalDir() string { return filepath.Join(filepath.Dir(StateDir), "disrupt") }

// cleanDisruptJournals removes the journals (cnb-<id>.jsonl) a killed
// `disrupt run` left, for the run ids gone matches: every change such a
// journal records lives inside the run's lab namespaces, so once they are
// gone it names nothing left to undo. A run id whose namespaces are still
// there (their removal failed, or a live run) keeps its journal.
func cleanDisruptJournals(dir string, gone func(id string) bool) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		n := e.Name()
		id, ok := strings.CutSuffix(strings.TrimPrefix(n, runid.Prefix), ".jsonl")
		if !ok || !strings.HasPrefix(n, runid.Prefix) || !runid.Valid(id) || !gone(id) {
			continue
		}
		if os.Remove(filepath.Join(dir, n)) == nil {
			removed = append(removed, "disrupt journal "+n)
		}
	}
	return removed
}

// remaining looks again, after the sweep, for what the sweep should have
// removed: a cnb-* namespace or host link still there is named, so a clean
// never reports success over something it left. Objects whose removal
// already failed (failed) are not named twice.
func remaining(ours func(string) bool, failed map[string]bool) []error {
	named := func(n string) bool { return failed[n] }
	var left []error
	nss, _ := netns.List(runid.Prefix)
	for _, ns := range nss {
		if ours(ns) && !named(ns) {
			left = append(left, fmt.Errorf("netns %q is still there after the sweep", ns))
		}
	}
	links, _ := netlink.LinkList()
	for _, lk := range links {
		if n := lk.Attrs().Name; ours(n) && !named(n) {
			left = append(left, fmt.Errorf("link %q is still there after the sweep", n))
		}
	}
	return left
}

// ErrOwnerRunning is wrapped when Clean leaves a lab because the process
// that built it is still running.
var ErrOwnerRunning = errors.New("still in use")

// liveOwners maps run ids to a lab of theirs whose builder is another
// process still running: one that started no later than the lab was
// created, so a pid the kernel reused since for something else does not
// count.
func liveOwners() map[string]*Lab {
	labs, _ := List()
	live := map[string]*Lab{}
	for _, l := range labs {
		if l.PID <= 0 || l.PID == os.Getpid() || !procAlive(l.PID) {
			continue
		}
		if st, ok := procStarted(l.PID); !ok || st.After(l.Created.Add(time.Second)) {
			continue
		}
		live[l.ID] = l
	}
	return live
}

// procStarted is when process pid started: field 22 of /proc/pid/stat in
// clock ticks after boot (USER_HZ, 100 on every Linux architecture Go
// supports), plus the boot time from /proc/stat.
func procStarted(pid int) (time.Time, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return time.Time{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 { // state is field 3, starttime field 22
		return time.Time{}, false
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	st, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(boot, 0).Add(time.Duration(ticks) * 10 * time.Millisecond), true
		}
	}
	return time.Time{}, false
}

// procComm is pid's command name, or "?" when it cannot be read.
func procComm(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// cleanHostOVS deletes from the host's Open vSwitch the bridges ours
// accepts, then the ports it accepts that someone added to a bridge that
// is not ours.
func cleanHostOVS(ctx context.Context, ours func(string) bool) (removed []string, errs []error) {
	sw := hostSwitch()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	brs, err := sw.Bridges(lctx)
	cancel()
	if err != nil {
		errs = append(errs, fmt.Errorf("open vswitch: list bridges: %w", err))
	}
	for _, br := range brs {
		if ours(br.Name) {
			if err := sw.DelBridge(ctx, br.Name); err != nil {
				errs = append(errs, fmt.Errorf("open vswitch: %w", seeLog(err, hostVswitchdLog)))
			} else {
				removed = append(removed, "ovs bridge "+br.Name)
			}
		}
	}
	lctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	ports, err := sw.Ports(lctx)
	cancel()
	if err != nil {
		return removed, errs
	}
	for _, pt := range ports {
		if ours(pt) {
			if err := sw.DelPort(ctx, pt); err != nil {
				errs = append(errs, fmt.Errorf("open vswitch: %w", seeLog(err, hostVswitchdLog)))
			} else {
				removed = append(removed, "ovs port "+pt)
			}
		}
	}
	return removed, errs
}
