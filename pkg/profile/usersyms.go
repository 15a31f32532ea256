package profile

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The userspace datapath's own code. Samples a process takes in user space
// are one "[user]" frame (the package doc says why); for the processes
// named in UserSymbolized — Open vSwitch's vswitchd, whose user time *is*
// the datapath: flow lookup, conntrack, tunnel push/pop, upcalls — the
// function the sample was taken in follows it as a frame
// "[user:FUNCTION@MODULE]", read from the module's ELF symbol table. Where
// the symbols do not allow it, the frame says so instead of guessing:
// "[user:?@MODULE stripped]" for a module with no symbol table (Debian's
// ovs-vswitchd: its functions need its debug symbols), "[user:?@MODULE]"
// for an address no symbol of the module covers, "[user:?]" for one in no
// file mapping (anonymous or JIT code).

// UserSymbolized are the process names (comm) whose user-space samples are
// resolved to functions.
var UserSymbolized = map[string]bool{"ovs-vswitchd": true, "ovs-vswitchd-dp": true}

// UserFramePrefix starts a resolved (or unresolvable) user function frame.
const UserFramePrefix = "[user:"

// userSyms resolves user addresses of the processes of one window: each
// process's executable mappings read once, each module's symbols once.
type userSyms struct {
	procs   map[uint32][]mapping
	modules map[string]*module
}

// mapping is one executable file mapping of a process (/proc/PID/maps).
type mapping struct {
	start, end, off uint64
	path            string
}

// module is one ELF file's functions and loadable segments.
type module struct {
	name  string
	funcs []elfFunc // sorted by addr
	loads []*elf.Prog
	// why, when set, says the module's functions cannot be named.
	why string
}

type elfFunc struct {
	addr, size uint64
	name       string
}

func newUserSyms() *userSyms {
	return &userSyms{procs: map[uint32][]mapping{}, modules: map[string]*module{}}
}

// frame names the function of process pid at user address addr.
func (u *userSyms) frame(pid uint32, addr uint64) string {
	maps, ok := u.procs[pid]
	if !ok {
		maps = readMaps(pid)
		u.procs[pid] = maps
	}
	for _, m := range maps {
		if addr < m.start || addr >= m.end {
			continue
		}
		mod := u.module(m.path)
		if mod.why != "" {
			return UserFramePrefix + "?@" + mod.name + " " + mod.why + "]"
		}
		if fn, ok := mod.lookup(addr - m.start + m.off); ok {
			return UserFramePrefix + sanitize(fn) + "@" + mod.name + "]"
		}
		return UserFramePrefix + "?@" + mod.name + "]"
	}
	return UserFramePrefix + "?]"
}

func (u *userSyms) module(path string) *module {
	if m, ok := u.modules[path]; ok {
		return m
	}
	m := loadModule(path)
	u.modules[path] = m
	return m
}

// readMaps reads the executable file mappings of pid; none when it is
// gone.
func readMaps(pid uint32) []mapping {
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/maps")
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseMaps(bufio.NewScanner(f))
}

// parseMaps reads /proc/PID/maps lines: "start-end perms offset dev inode
// path"; only mappings of files with execute permission are kept.
func parseMaps(sc *bufio.Scanner) []mapping {
	var out []mapping
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.Contains(f[1], "x") || !strings.HasPrefix(f[5], "/") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, mapping{start: start, end: end, off: off, path: f[5]})
	}
	return out
}

// loadModule reads an ELF file's function symbols: its symbol table, or —
// a stripped file has none — its dynamic symbols, which name only what it
// exports (a shared library's API; of an executable, usually nothing).
func loadModule(path string) *module {
	m := &module{name: sanitize(filepath.Base(path))}
	f, err := elf.Open(path)
	if err != nil {
		m.why = "unreadable"
		return m
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			m.loads = append(m.loads, p)
		}
	}
	syms, err := f.Symbols()
	stripped := errors.Is(err, elf.ErrNoSymbols)
	if stripped {
		syms, err = f.DynamicSymbols()
	}
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		m.why = "unreadable"
		return m
	}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && s.Size > 0 && s.Section != elf.SHN_UNDEF {
			m.funcs = append(m.funcs, elfFunc{addr: s.Value, size: s.Size, name: s.Name})
		}
	}
	if stripped && len(m.funcs) == 0 {
		// A stripped executable's dynamic symbols are its imports: none
		// of its own functions has a name (a stripped shared library
		// still names what it exports).
		m.why = "stripped"
		return m
	}
	sort.Slice(m.funcs, func(i, j int) bool { return m.funcs[i].addr < m.funcs[j].addr })
	return m
}

// lookup names the function covering file offset off.
func (m *module) lookup(off uint64) (string, bool) {
	vaddr, ok := uint64(0), false
	for _, p := range m.loads {
		if off >= p.Off && off < p.Off+p.Filesz {
			vaddr, ok = off-p.Off+p.Vaddr, true
			break
		}
	}
	if !ok {
		return "", false
	}
	i := sort.Search(len(m.funcs), func(i int) bool { return m.funcs[i].addr > vaddr }) - 1
	if i < 0 || vaddr >= m.funcs[i].addr+m.funcs[i].size {
		return "", false
	}
	return m.funcs[i].name, true
}

// String is for tests and errors.
func (m mapping) String() string {
	return fmt.Sprintf("%x-%x %x %s", m.start, m.end, m.off, m.path)
}
