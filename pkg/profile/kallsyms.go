package profile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Symbols resolves kernel addresses to function names. Built from
// /proc/kallsyms before the first window (so reading ~200,000 lines never
// falls inside a measurement), then looked up by binary search. The core
// kernel's text never moves; modules and JITed BPF programs come and go
// (Cilium loads a pod's programs when the pod starts, a lab its fast path
// when it is built), so an address there may belong to code loaded after
// the table was read: Volatile says so, and a window that sampled one
// reads the table again (Session.Stop).
type Symbols struct {
	addrs []uint64
	names []string
	// loaded marks symbols of loaded code: a "[module]" tag in kallsyms
	// ("[bpf]" for JITed programs).
	loaded []bool
	// coreEnd is the highest address of the core kernel's text symbols.
	coreEnd uint64
}

// KernelSymbols reads /proc/kallsyms. Addresses that are all zero (a
// kernel.kptr_restrict the reader does not pass) are an ErrPermission.
func KernelSymbols() (*Symbols, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, fmt.Errorf("read kernel symbols: %w", err)
	}
	defer f.Close()
	s, err := ParseKallsyms(f)
	if err != nil {
		return nil, err
	}
	if len(s.addrs) == 0 {
		return nil, fmt.Errorf("%w: /proc/kallsyms shows no addresses (kernel.kptr_restrict): run as root or set kernel.kptr_restrict=0", ErrPermission)
	}
	return s, nil
}

// ParseKallsyms parses the /proc/kallsyms format ("ffffffff81000000 T
// _stext [module]"). Only text symbols (t/T) are kept; zero addresses are
// dropped (hidden, or not a place a sample can land).
func ParseKallsyms(r io.Reader) (*Symbols, error) {
	type sym struct {
		addr   uint64
		name   string
		loaded bool
	}
	var syms []sym
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			return nil, fmt.Errorf("kallsyms line %d: want \"address type name\", got %q", line, sc.Text())
		}
		if t := fields[1]; t != "t" && t != "T" {
			continue
		}
		a, err := strconv.ParseUint(fields[0], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("kallsyms line %d: address %q: %v", line, fields[0], err)
		}
		if a == 0 {
			continue
		}
		syms = append(syms, sym{a, fields[2], len(fields) > 3 && strings.HasPrefix(fields[3], "[")})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	sort.Slice(syms, func(i, j int) bool { return syms[i].addr < syms[j].addr })
	s := &Symbols{addrs: make([]uint64, len(syms)), names: make([]string, len(syms)), loaded: make([]bool, len(syms))}
	for i, x := range syms {
		s.addrs[i], s.names[i], s.loaded[i] = x.addr, x.name, x.loaded
		if !x.loaded {
			s.coreEnd = max(s.coreEnd, x.addr)
		}
	}
	return s, nil
}

// Lookup names the function containing addr: the symbol with the greatest
// address not above it. ok is false below the first symbol.
func (s *Symbols) Lookup(addr uint64) (string, bool) {
	i := sort.Search(len(s.addrs), func(i int) bool { return s.addrs[i] > addr })
	if i == 0 {
		return "", false
	}
	return s.names[i-1], true
}

// Volatile reports whether addr may belong to code loaded after the table
// was read: it lies past the core kernel's last text symbol, or resolves to
// a module's or a BPF program's symbol.
func (s *Symbols) Volatile(addr uint64) bool {
	if addr > s.coreEnd {
		return true
	}
	i := sort.Search(len(s.addrs), func(i int) bool { return s.addrs[i] > addr })
	return i > 0 && s.loaded[i-1]
}

// Len is the number of text symbols.
func (s *Symbols) Len() int { return len(s.addrs) }

var progSymbol = regexp.MustCompile(`^bpf_prog_([0-9a-f]{16})_(.+)$`)

// ProgSymbol splits a JITed BPF program's kernel symbol,
// bpf_prog_<16 hex tag>_<name>, into tag and name (name is the program's
// function name in full where the kernel had its BTF, else the program's
// 15-byte name).
func ProgSymbol(sym string) (tag, name string, ok bool) {
	m := progSymbol.FindStringSubmatch(sym)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}
