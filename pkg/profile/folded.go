package profile

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// UserFrame stands for every user-space frame of a sample (user code is
// attributed per process, not symbolised).
const UserFrame = "[user]"

// UnknownFrame is a kernel address no symbol covers.
const UnknownFrame = "[unknown]"

// foldStack builds one folded line's stack from a sample: comm first, then
// the kernel callchain root first. chain is leaf first as the kernel gives
// it, with PERF_CONTEXT_* markers.
//
// userFrame, when not nil, names the function of the sample's user-space
// leaf (usersyms.go); its frame follows "[user]" in a sample taken in user
// space, the process's own code.
func foldStack(comm string, ip uint64, chain []uint64, syms *Symbols, userFrame func(addr uint64) string) string {
	var kernel []string
	user := false
	var userLeaf uint64
	ctx := contextKernel
	for _, a := range chain {
		switch int64(a) {
		case perfContextKernel:
			ctx = contextKernel
			continue
		case perfContextUser:
			ctx = contextUser
			continue
		}
		if v := int64(a); v >= perfContextMax && v < 0 { // other markers (hv, guest)
			ctx = contextOther
			continue
		}
		switch ctx {
		case contextKernel:
			kernel = append(kernel, symbolize(a, syms))
		case contextUser:
			if !user {
				userLeaf = a
			}
			user = true
		}
	}
	if len(chain) == 0 {
		// No callchain (the kernel could not unwind): the IP alone.
		if isKernelAddr(ip) {
			kernel = append(kernel, symbolize(ip, syms))
		} else {
			user, userLeaf = true, ip
		}
	}
	var b strings.Builder
	b.WriteString(sanitize(comm))
	if user {
		b.WriteString(";" + UserFrame)
		if userFrame != nil && len(kernel) == 0 {
			b.WriteString(";" + userFrame(userLeaf))
		}
	}
	for i := len(kernel) - 1; i >= 0; i-- {
		b.WriteString(";")
		b.WriteString(kernel[i])
	}
	return b.String()
}

func symbolize(a uint64, syms *Symbols) string {
	if syms != nil {
		if n, ok := syms.Lookup(a); ok {
			return n
		}
	}
	return UnknownFrame
}

// isKernelAddr: on the 64-bit architectures Linux runs containers on, kernel
// text lives in the upper half of the address space.
func isKernelAddr(a uint64) bool { return a >= 1<<63 }

// sanitize keeps a comm from breaking the folded format.
func sanitize(comm string) string {
	comm = strings.TrimSpace(comm)
	if comm == "" {
		return "[unknown]"
	}
	return strings.Map(func(r rune) rune {
		if r == ';' || r == ' ' || r == '\n' || r == '\t' {
			return '_'
		}
		return r
	}, comm)
}

// WriteFolded writes stacks as folded lines sorted by count (largest
// first, then by stack, so the output is deterministic).
func WriteFolded(w io.Writer, stacks map[string]uint64) error {
	bw := bufio.NewWriter(w)
	for _, k := range sortedStacks(stacks) {
		if _, err := fmt.Fprintf(bw, "%s %d\n", k, stacks[k]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func sortedStacks(stacks map[string]uint64) []string {
	// Most samples first; equal counts by stack, so the output is stable.
	return slices.SortedFunc(maps.Keys(stacks), func(a, b string) int {
		return cmp.Or(cmp.Compare(stacks[b], stacks[a]), strings.Compare(a, b))
	})
}

// ParseFolded reads folded lines ("a;b;c 12"). Lines with the same stack
// are summed.
func ParseFolded(r io.Reader) (map[string]uint64, error) {
	out := map[string]uint64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 {
			return nil, fmt.Errorf("folded line %d: want \"frame;frame count\", got %q", n, line)
		}
		c, err := strconv.ParseUint(line[i+1:], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("folded line %d: count %q: %v", n, line[i+1:], err)
		}
		out[line[:i]] += c
	}
	return out, sc.Err()
}

// Bound trims stacks so their folded text fits in maxBytes: the rarest
// stacks are merged into their parent prefix (the leaf frame dropped) until
// it fits, so every sample is still counted and the shares do not change at
// the depth kept. It returns the number of stacks merged.
func Bound(stacks map[string]uint64, maxBytes int) int {
	size := func() int {
		n := 0
		for k, v := range stacks {
			n += len(k) + 2 + len(strconv.FormatUint(v, 10))
		}
		return n
	}
	merged := 0
	for size() > maxBytes {
		var keys []string
		for _, k := range sortedStacks(stacks) {
			if strings.Contains(k, ";") { // a bare comm cannot shrink further
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			break
		}
		// Merge the rarest quarter (at least one) per pass.
		cut := max(len(keys)/4, 1)
		for _, k := range keys[len(keys)-cut:] {
			j := strings.LastIndexByte(k, ';')
			stacks[k[:j]] += stacks[k]
			delete(stacks, k)
			merged++
		}
	}
	return merged
}
