package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a message size in the qperf convention: a byte count with
// an optional K, M or G suffix meaning 1024, 1024², 1024³ ("1", "64", "1K", "64K").
func ParseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.Atoi(t)
	if err != nil || v < 1 || v > (1<<31-1)/mult {
		return 0, fmt.Errorf("bad message size %q: want a positive byte count like 1, 64, 1K, 4K, 64K (K = 1024)", s)
	}
	return v * mult, nil
}

// ParseSizes reads a comma-separated list of sizes.
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

// ParseRate reads a rate in bits per second with an optional K, M or G
// suffix meaning 10³, 10⁶, 10⁹ (network convention, like iperf3 -b):
// "100M", "2G". "0" means unlimited.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult = 1e3
		case 'm', 'M':
			mult = 1e6
		case 'g', 'G':
			mult = 1e9
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v != v || v > 1e15 {
		return 0, fmt.Errorf("bad rate %q: want bits/s like 100M or 2G (0 = unlimited)", s)
	}
	return v * mult, nil
}
