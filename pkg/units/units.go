// Package units parses and prints the sizes, rates and durations users type:
// message sizes in the qperf convention (1, 64, 1K, 4K, 64K with K = 1024) and
// bit rates in the iperf3 convention (100M, 2G with M = 10^6 bits/s).
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize parses a byte count: a plain number or one with a K, M or G suffix
// (powers of 1024, as qperf's msg_size and iperf3's -l take them).
func ParseSize(s string) (int, error) {
	t, pow := cutSuffix(strings.TrimSpace(s))
	mult := 1 << (10 * pow)
	v, err := strconv.Atoi(t)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad size %q: want a positive number of bytes like 1, 64, 1K, 4K, 64K", s)
	}
	if v > (1<<31-1)/mult {
		return 0, fmt.Errorf("bad size %q: too large", s)
	}
	return v * mult, nil
}

// cutSuffix splits a K, M or G suffix (either case) off a number and says
// which power of the unit it stands for: 1 for K, 2 for M, 3 for G, 0 for
// none. Sizes and rates share the letters but not the base (1024 or 1000).
func cutSuffix(t string) (string, int) {
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			return t[:n-1], 1
		case 'm', 'M':
			return t[:n-1], 2
		case 'g', 'G':
			return t[:n-1], 3
		}
	}
	return t, 0
}

// ParseSizes reads a comma-separated list of sizes (1,1K,4K), as --msg-size
// takes them; an empty element is an error, not a zero.
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := ParseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// FormatSize prints a byte count the way ParseSize reads it: 1, 64, 1K, 4K.
func FormatSize(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.Itoa(n>>30) + "G"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "M"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "K"
	}
	return strconv.Itoa(n)
}

// ParseRate parses a bit rate: a plain number of bits/s or one with a K, M or
// G suffix (powers of 1000, as iperf3's -b takes them). "0" means unlimited.
func ParseRate(s string) (float64, error) {
	t, pow := cutSuffix(strings.TrimSpace(s))
	mult := [...]float64{1, 1e3, 1e6, 1e9}[pow]
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bad rate %q: want bits per second like 0 (unlimited), 100M, 2G", s)
	}
	return v * mult, nil
}

// SplitList reads a comma-separated list of names (tests, knob ids),
// trimming blanks and dropping empty elements.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
