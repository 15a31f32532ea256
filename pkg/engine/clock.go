package engine

import (
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock: a vDSO clock_gettime without
// the wall-clock read time.Now also does. It is what the latency loops
// stamp each transaction with.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
