package engine

import (
	"strings"

	"github.com/cnibench/cnibench/pkg/units"
)

// ParseSizes reads a comma-separated list of message sizes in the qperf
// convention (1, 64, 1K, 4K, 64K; K = 1024), as --msg-size takes them.
func ParseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := units.ParseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
