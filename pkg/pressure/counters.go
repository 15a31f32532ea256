package pressure

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cnibench/cnibench/pkg/netns"
)

// The datapath's own counters, read inside one network namespace: the
// conntrack statistics (/proc/net/stat/nf_conntrack, one line of hex
// columns per CPU), the table's count and limit (/proc/sys), and the TCP
// counters that say a connection did not get through (/proc/net/netstat
// and /proc/net/snmp). Everything is read through /proc/thread-self, which
// is the calling thread's namespace: netns.Do puts the thread there.

// ConntrackStats are the conntrack statistics of one namespace, summed
// over its CPUs (the kernel keeps one set per CPU).
type ConntrackStats struct {
	// Found counts lookups that found an entry, Insert entries added.
	Found  uint64 `json:"found"`
	Insert uint64 `json:"insert"`
	// InsertFailed counts entries that could not be added (a clash the
	// kernel could not resolve); Drop packets dropped because no entry
	// could be made (the table was full and nothing could be evicted);
	// EarlyDrop entries evicted to make room when the table was full.
	InsertFailed uint64 `json:"insert_failed"`
	Drop         uint64 `json:"drop"`
	EarlyDrop    uint64 `json:"early_drop"`
	Invalid      uint64 `json:"invalid"`
}

// Sub returns c − before.
func (c ConntrackStats) Sub(before ConntrackStats) ConntrackStats {
	return ConntrackStats{Found: c.Found - before.Found, Insert: c.Insert - before.Insert,
		InsertFailed: c.InsertFailed - before.InsertFailed, Drop: c.Drop - before.Drop,
		EarlyDrop: c.EarlyDrop - before.EarlyDrop, Invalid: c.Invalid - before.Invalid}
}

// ParseConntrackStat reads /proc/net/stat/nf_conntrack: a header of column
// names, then one line per CPU of hex numbers. Columns are found by name,
// so kernels that add or drop columns still parse; a missing column we use
// is an error, never a zero.
func ParseConntrackStat(b []byte) (ConntrackStats, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() {
		return ConntrackStats{}, errors.New("nf_conntrack stat: empty")
	}
	cols := strings.Fields(sc.Text())
	idx := map[string]int{}
	for i, c := range cols {
		idx[c] = i
	}
	want := []string{"found", "insert", "insert_failed", "drop", "early_drop", "invalid"}
	for _, w := range want {
		if _, ok := idx[w]; !ok {
			return ConntrackStats{}, fmt.Errorf("nf_conntrack stat: no column %q in %q", w, sc.Text())
		}
	}
	sum := make([]uint64, len(cols))
	rows := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != len(cols) {
			return ConntrackStats{}, fmt.Errorf("nf_conntrack stat: line %d has %d columns, the header %d", rows+2, len(f), len(cols))
		}
		for i, v := range f {
			n, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				return ConntrackStats{}, fmt.Errorf("nf_conntrack stat: line %d column %s: %w", rows+2, cols[i], err)
			}
			sum[i] += n
		}
		rows++
	}
	if rows == 0 {
		return ConntrackStats{}, errors.New("nf_conntrack stat: no per-CPU lines")
	}
	return ConntrackStats{Found: sum[idx["found"]], Insert: sum[idx["insert"]], InsertFailed: sum[idx["insert_failed"]],
		Drop: sum[idx["drop"]], EarlyDrop: sum[idx["early_drop"]], Invalid: sum[idx["invalid"]]}, nil
}

// ParseNetstat reads /proc/net/netstat or /proc/net/snmp: pairs of lines
// "Section: names…" and "Section: values…", into "Section.Name" → value.
func ParseNetstat(b []byte) (map[string]int64, error) {
	out := map[string]int64{}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines)%2 != 0 {
		return nil, fmt.Errorf("netstat: %d lines, want pairs of names and values", len(lines))
	}
	for i := 0; i < len(lines); i += 2 {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) != len(values) || len(names) == 0 || names[0] != values[0] {
			return nil, fmt.Errorf("netstat: lines %d and %d do not pair", i+1, i+2)
		}
		sec := strings.TrimSuffix(names[0], ":")
		for j := 1; j < len(names); j++ {
			v, err := strconv.ParseInt(values[j], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("netstat: %s.%s: %w", sec, names[j], err)
			}
			out[sec+"."+names[j]] = v
		}
	}
	return out, nil
}

// The TCP counters a snapshot keeps: a SYN sent again (no answer: dropped
// on the way), a full listen queue on the server, a failed connect.
var tcpCounters = []string{"TcpExt.TCPSynRetrans", "TcpExt.ListenOverflows", "TcpExt.ListenDrops", "Tcp.AttemptFails", "Tcp.ActiveOpens", "Tcp.PassiveOpens"}

// Snapshot is one namespace's counters at one moment.
type Snapshot struct {
	// Conntrack is false where the namespace has no conntrack (the module
	// not loaded, or no table there); then Stats, Count and Max mean
	// nothing and are left out of results.
	Conntrack bool
	Stats     ConntrackStats
	Count     int64
	Max       int64
	TCP       map[string]int64
}

// readIn reads the counters in the calling thread's namespace, below root
// (normally "/proc"; a fixture tree in tests).
func readIn(root string) (Snapshot, error) {
	var s Snapshot
	b, err := os.ReadFile(filepath.Join(root, "thread-self/net/stat/nf_conntrack"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		// no conntrack module: nothing is tracked here
	case err != nil:
		return s, err
	default:
		if s.Stats, err = ParseConntrackStat(b); err != nil {
			return s, err
		}
		if s.Count, err = readInt(filepath.Join(root, "sys/net/netfilter/nf_conntrack_count")); err != nil {
			return s, err
		}
		if s.Max, err = readInt(filepath.Join(root, "sys/net/netfilter/nf_conntrack_max")); err != nil {
			return s, err
		}
		s.Conntrack = true
	}
	s.TCP = map[string]int64{}
	for _, f := range []string{"thread-self/net/netstat", "thread-self/net/snmp"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return s, err
		}
		m, err := ParseNetstat(b)
		if err != nil {
			return s, fmt.Errorf("%s: %w", f, err)
		}
		for _, k := range tcpCounters {
			if v, ok := m[k]; ok {
				s.TCP[k] = v
			}
		}
	}
	return s, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// Read takes a snapshot of namespace ns ("" = this thread's).
func Read(ns string) (Snapshot, error) {
	if ns == "" {
		return readIn("/proc")
	}
	var s Snapshot
	err := netns.Do(ns, func() error {
		var err error
		s, err = readIn("/proc")
		return err
	})
	if err != nil {
		return s, fmt.Errorf("counters in %s: %w", ns, err)
	}
	return s, nil
}
