// Package probe finds what this kernel and host offer for container
// datapaths: tunnel and link types, IPsec, Open vSwitch (kernel, userspace,
// DPDK), VDUSE/vDPA, the eBPF pieces a host-routing fast path needs, BIG
// TCP, IPVS, both iptables backends, perf events, busy polling and the
// cpuidle driver. Every check says how it decided. Checks that must create
// something do it in a throwaway network namespace named cnb-<id>-probe,
// removed on every path; nothing on the host changes.
package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrNotSupported is matched by Require's error when a capability is
// absent; pkg/lab wraps it into its own not-supported errors.
var ErrNotSupported = errors.New("not supported by this host")

// Capability is one answer.
type Capability struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Supported is nil when the check could not decide (its Detail says why).
	Supported *bool  `json:"supported"`
	How       string `json:"how"`              // how it was detected
	Detail    string `json:"detail,omitempty"` // e.g. the kernel's error, a version, a value
}

// Report is every capability, in a stable order.
type Report struct {
	Kernel       string        `json:"kernel"`
	Capabilities []Capability  `json:"capabilities"`
	Took         time.Duration `json:"took_ns"`
}

// check decides one capability. ns is the throwaway namespace ("" when the
// check needs none).
type check struct {
	id, title string
	needsNS   bool
	run       func(ctx context.Context, ns string) (ok *bool, how, detail string)
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// Run probes everything. It needs root for the namespace checks; without
// it those capabilities are undecided, not absent.
func Run(ctx context.Context) (*Report, error) {
	return run(ctx, checks(), "")
}

// RunIn is Run with the throwaway namespace named ns, one its caller's
// cleanup can find (pkg/lab reserves it in its state directory).
func RunIn(ctx context.Context, ns string) (*Report, error) {
	return run(ctx, checks(), ns)
}

// Require probes the named capabilities only and returns an error wrapping
// ErrNotSupported naming the first one this host lacks, with how that was
// found. ns names the throwaway namespace ("" picks cnb-<new id>-probe), so
// a caller can make it one its own cleanup finds.
func Require(ctx context.Context, ns string, ids ...string) error {
	var sel []check
	for _, c := range checks() {
		for _, id := range ids {
			if c.id == id {
				sel = append(sel, c)
			}
		}
	}
	if len(sel) != len(ids) {
		return fmt.Errorf("probe: unknown capability in %v (known: %s)", ids, strings.Join(IDs(), ", "))
	}
	r, err := run(ctx, sel, ns)
	if err != nil {
		return err
	}
	for _, c := range r.Capabilities {
		if c.Supported != nil && !*c.Supported {
			return fmt.Errorf("%s: %w (%s: %s)", c.ID, ErrNotSupported, c.How, c.Detail)
		}
	}
	return nil
}

// IDs lists the capability ids, in report order.
func IDs() []string {
	var out []string
	for _, c := range checks() {
		out = append(out, c.id)
	}
	return out
}

func run(ctx context.Context, cs []check, nsName string) (*Report, error) {
	start := time.Now()
	r := &Report{Kernel: kernelRelease()}
	ns := ""
	for _, c := range cs {
		if c.needsNS && ns == "" {
			ns = nsName
			if ns == "" {
				ns = runid.Name(runid.New(), "probe")
			}
			if err := netns.Create(ns); err != nil {
				ns = ""
				break
			}
			// Best effort: a leftover cnb- namespace is what lab clean removes.
			defer func() { _ = netns.Delete(ns) }()
		}
	}
	for _, c := range cs {
		if c.needsNS && ns == "" {
			r.Capabilities = append(r.Capabilities, Capability{ID: c.id, Title: c.title, How: "a throwaway network namespace",
				Detail: "could not create one (needs root)"})
			continue
		}
		ok, how, detail := c.run(ctx, ns)
		r.Capabilities = append(r.Capabilities, Capability{ID: c.id, Title: c.title, Supported: ok, How: how, Detail: detail})
	}
	r.Took = time.Since(start)
	return r, nil
}

// Supported returns the ids this report says are supported, sorted: the
// short form stored in a run's host fingerprint.
func (r *Report) Supported() []string {
	var out []string
	for _, c := range r.Capabilities {
		if c.Supported != nil && *c.Supported {
			out = append(out, c.ID)
		}
	}
	sort.Strings(out)
	return out
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// moduleState says whether a kernel feature is there without loading
// anything: its module is loaded (/sys/module), or listed in
// modules.builtin/modules.dep (it loads on first use). A kernel without
// /lib/modules cannot load modules at all, so then the feature's own trace
// decides: its generic netlink family (genl) or a file it creates (file).
func moduleState(name, genl, file string) (ok *bool, how string) {
	if _, err := os.Stat("/sys/module/" + name); err == nil {
		return yes(), "module " + name + " loaded (/sys/module)"
	}
	rel := kernelRelease()
	dep := filepath.Join("/lib/modules", rel, "modules.dep")
	if _, err := os.Stat(dep); err != nil {
		switch {
		case genl != "":
			if _, err := netlink.GenlFamilyGet(genl); err == nil {
				return yes(), "generic netlink family " + genl + " registered"
			}
			return no(), "no " + dep + " (modules cannot load) and no generic netlink family " + genl
		case file != "":
			if _, err := os.Stat(file); err == nil {
				return yes(), file + " exists"
			}
			return no(), "no " + dep + " (modules cannot load) and no " + file
		}
		return nil, "no " + dep + " to look " + name + " up in"
	}
	for _, f := range []string{"modules.builtin", "modules.dep"} {
		b, err := os.ReadFile(filepath.Join("/lib/modules", rel, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			path, _, _ := strings.Cut(line, ":")
			base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
			base = strings.TrimSuffix(base, ".ko")
			if strings.ReplaceAll(base, "-", "_") == name {
				return yes(), fmt.Sprintf("module %s listed in /lib/modules/%s/%s", name, rel, f)
			}
		}
	}
	return no(), "module " + name + " neither loaded nor in /lib/modules/" + rel
}

func fileCheck(path, what string) (*bool, string, string) {
	if _, err := os.Stat(path); err == nil {
		return yes(), path + " exists", ""
	} else if errors.Is(err, os.ErrNotExist) {
		return no(), path + " does not exist", what
	} else {
		return nil, "stat " + path, err.Error()
	}
}

// installed is binCheck and fileCheck of a package's programs and files,
// with the command that installs it when something is missing.
func installed(install string, bins []string, files ...string) (*bool, string, string) {
	ok, how, detail := binCheck(bins...)
	var missing []string
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(files) > 0 {
		how += "; looked for " + strings.Join(files, ", ")
	}
	if len(missing) > 0 {
		ok = no()
		if detail != "" {
			detail += ", "
		} else {
			detail = "missing: "
		}
		detail += strings.Join(missing, ", ")
	}
	if ok != nil && !*ok {
		detail += " (" + install + ")"
	}
	return ok, how, detail
}

func binCheck(bins ...string) (*bool, string, string) {
	var missing []string
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return no(), "looked up on $PATH: " + strings.Join(bins, ", "), "missing: " + strings.Join(missing, ", ")
	}
	return yes(), "found on $PATH: " + strings.Join(bins, ", "), ""
}
