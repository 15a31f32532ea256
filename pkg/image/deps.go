package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Resolver finds the files a dynamically linked program loads, the way the
// dynamic loader (ld.so) finds them: the program's interpreter (PT_INTERP),
// then every DT_NEEDED library, recursively, searched in the requiring
// object's DT_RPATH (only when it has no DT_RUNPATH), its DT_RUNPATH, the
// loader's cache (/etc/ld.so.cache, read through `ldconfig -p`) and the
// default directories. A candidate for another ELF class or machine is
// skipped, as ld.so skips it. Only the libraries a program names are found:
// what it dlopen()s at run time by a name computed then is not.
type Resolver struct {
	// Root is the file system the paths are looked up in; "" means "/".
	// Tests point it at a fixture tree.
	Root string
	// Cache maps a soname to the paths the loader's cache lists for it, in
	// the cache's order; nil means no cache (default directories only).
	Cache map[string][]string
	// Dirs are the default directories, searched after the cache.
	Dirs []string
}

// defaultDirs are the directories Debian's ld.so searches when the cache
// does not name a library: the multiarch directories first, then the
// classic ones.
func defaultDirs() []string {
	tuple := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	var d []string
	if tuple != "" {
		d = append(d, "/lib/"+tuple, "/usr/lib/"+tuple)
	}
	return append(d, "/lib", "/usr/lib")
}

// HostResolver resolves on this machine: its loader cache (when `ldconfig`
// is there to print it) and the default directories.
func HostResolver() *Resolver {
	r := &Resolver{Root: "/", Dirs: defaultDirs()}
	bin, err := exec.LookPath("ldconfig")
	if err != nil {
		bin = "/sbin/ldconfig"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "-p").Output(); err == nil {
		r.Cache = ParseLdconfig(out)
	}
	return r
}

// ParseLdconfig reads `ldconfig -p` output, lines like
//
//	libc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6
//
// into soname → paths, in the cache's order (the loader's preference).
func ParseLdconfig(out []byte) map[string][]string {
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		left, p, ok := strings.Cut(line, " => ")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		name, _, _ := strings.Cut(left, " ")
		if name != "" {
			m[name] = append(m[name], strings.TrimSpace(p))
		}
	}
	return m
}

func (r *Resolver) root() string {
	if r.Root == "" {
		return "/"
	}
	return r.Root
}

// host maps a path as the program sees it onto the resolver's root.
func (r *Resolver) host(p string) string { return filepath.Join(r.root(), p) }

// ErrLibraryNotFound is wrapped when a needed library is nowhere the loader
// would look.
var ErrLibraryNotFound = errors.New("shared library not found")

// Closure returns the program (an absolute path) and every file the loader
// opens to start it: its interpreter and its libraries, each as the path
// the loader finds it by (e.g. /lib/x86_64-linux-gnu/libc.so.6, a symbolic
// link in a merged-/usr system), sorted.
func (r *Resolver) Closure(prog string) ([]string, error) {
	if !path.IsAbs(prog) {
		return nil, fmt.Errorf("%s: want an absolute path", prog)
	}
	f, err := elf.Open(r.host(prog))
	if err != nil {
		return nil, fmt.Errorf("%s is not an ELF executable: %w", prog, err)
	}
	class, machine := f.Class, f.Machine
	f.Close()
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	add(prog)
	// ld.so loads a name once: a DT_NEEDED entry naming an object already
	// loaded — the interpreter among them, which libc names — is that
	// object, whatever a search would find.
	loaded := map[string]bool{}
	// Breadth first, as ld.so loads: the program's libraries, then theirs.
	queue := []string{prog}
	for len(queue) > 0 {
		obj := queue[0]
		queue = queue[1:]
		info, err := r.readDynamic(obj)
		if err != nil {
			return nil, err
		}
		if info.interp != "" && !seen[info.interp] {
			if _, err := os.Stat(r.host(info.interp)); err != nil {
				return nil, fmt.Errorf("%s: interpreter %s: %w", obj, info.interp, err)
			}
			add(info.interp)
			loaded[path.Base(info.interp)] = true
		}
		for _, lib := range info.needed {
			if loaded[lib] {
				continue
			}
			loaded[lib] = true
			p, err := r.find(lib, obj, info, class, machine)
			if err != nil {
				return nil, err
			}
			if !seen[p] {
				add(p)
				queue = append(queue, p)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

type dynInfo struct {
	interp          string
	needed          []string
	rpath, runpath  []string
	hasDynamicTable bool
}

func (r *Resolver) readDynamic(obj string) (*dynInfo, error) {
	f, err := elf.Open(r.host(obj))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", obj, err)
	}
	defer f.Close()
	info := &dynInfo{}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, fmt.Errorf("%s: read PT_INTERP: %w", obj, err)
			}
			info.interp = string(bytes.TrimRight(b, "\x00"))
		}
		if p.Type == elf.PT_DYNAMIC {
			info.hasDynamicTable = true
		}
	}
	if !info.hasDynamicTable {
		return info, nil // static: needs nothing
	}
	if info.needed, err = f.DynString(elf.DT_NEEDED); err != nil {
		return nil, fmt.Errorf("%s: read DT_NEEDED: %w", obj, err)
	}
	origin := path.Dir(obj)
	split := func(tag elf.DynTag) []string {
		vals, _ := f.DynString(tag)
		var dirs []string
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
				if d != "" {
					dirs = append(dirs, d)
				}
			}
		}
		return dirs
	}
	info.rpath, info.runpath = split(elf.DT_RPATH), split(elf.DT_RUNPATH)
	return info, nil
}

// find resolves one DT_NEEDED entry of obj.
func (r *Resolver) find(lib, obj string, info *dynInfo, class elf.Class, machine elf.Machine) (string, error) {
	if strings.Contains(lib, "/") {
		if r.fits(lib, class, machine) {
			return lib, nil
		}
		return "", fmt.Errorf("%s needs %s: %w", obj, lib, ErrLibraryNotFound)
	}
	var dirs []string
	if len(info.runpath) == 0 {
		dirs = append(dirs, info.rpath...)
	}
	dirs = append(dirs, info.runpath...)
	for _, d := range dirs {
		if p := path.Join(d, lib); r.fits(p, class, machine) {
			return p, nil
		}
	}
	for _, p := range r.Cache[lib] {
		if r.fits(p, class, machine) {
			return p, nil
		}
	}
	for _, d := range r.Dirs {
		if p := path.Join(d, lib); r.fits(p, class, machine) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s needs %s: %w (searched its RPATH/RUNPATH, the loader cache and %s)", obj, lib, ErrLibraryNotFound, strings.Join(r.Dirs, ", "))
}

// fits reports whether p is an ELF object of the wanted class and machine.
func (r *Resolver) fits(p string, class elf.Class, machine elf.Machine) bool {
	f, err := elf.Open(r.host(p))
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Class == class && f.Machine == machine
}

// fileEntry is one entry of the image's file system: a directory, a regular
// file (copied from Src) or a symbolic link (to Link, as the host has it).
type fileEntry struct {
	Name string // path in the layer, without the leading "/"
	Type byte   // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	Mode int64
	Src  string // host path of a regular file's content
	Link string
}

// maxLinks bounds symbolic link chains, as the kernel does (40).
const maxLinks = 40

// collect returns the entries that make every path in paths resolve in the
// image as it does on the host: each directory on the way (mode from the
// host), each symbolic link met on the way with its target unchanged (so
// /lib -> usr/lib and libfoo.so.1 -> libfoo.so.1.2 stay links), and the
// regular file at the end, with its host mode. Entries are keyed by name,
// so shared parents appear once.
func collect(root string, paths []string) (map[string]fileEntry, error) {
	out := map[string]fileEntry{}
	for _, p := range paths {
		if err := collectOne(root, p, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func collectOne(root, p string, out map[string]fileEntry) error {
	links := 0
	// rest are the components still to walk; cur is the resolved directory.
	rest := strings.Split(strings.Trim(path.Clean(p), "/"), "/")
	cur := "/"
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		name := strings.TrimPrefix(next, "/")
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if links++; links > maxLinks {
				return fmt.Errorf("%s: too many levels of symbolic links", p)
			}
			target, err := os.Readlink(filepath.Join(root, next))
			if err != nil {
				return err
			}
			out[name] = fileEntry{Name: name, Type: tar.TypeSymlink, Mode: 0o777, Link: target}
			if path.IsAbs(target) {
				cur = "/"
			}
			rest = append(strings.Split(strings.Trim(target, "/"), "/"), rest...)
		case fi.IsDir():
			if len(rest) == 0 {
				return fmt.Errorf("%s is a directory, want a file", p)
			}
			out[name+"/"] = fileEntry{Name: name + "/", Type: tar.TypeDir, Mode: int64(fi.Mode().Perm())}
			cur = next
		case fi.Mode().IsRegular():
			if len(rest) > 0 {
				return fmt.Errorf("%s: %s is not a directory", p, next)
			}
			out[name] = fileEntry{Name: name, Type: tar.TypeReg, Mode: int64(fi.Mode().Perm()), Src: filepath.Join(root, next)}
			cur = next
		default:
			return fmt.Errorf("%s: %s is neither a file, a directory nor a link", p, next)
		}
	}
	return nil
}
