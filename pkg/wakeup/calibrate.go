package wakeup

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Calibration is what waking a blocked thread on another CPU costs here under
// each policy that was tried: the one-way time of a pipe ping-pong between
// two threads pinned to two CPUs, each blocking in read(2) between messages
// exactly as a latency test's client and server block in recv(2). It is
// measured at the start of a run whose policy is auto, and decides it.
type Calibration struct {
	// OneWayUs maps a policy to the median one-way time in µs.
	OneWayUs map[Policy]float64 `json:"one_way_us"`
	// Chosen is the policy auto resolved to, and Why says on what figures.
	Chosen Policy `json:"chosen"`
	Why    string `json:"why"`
}

// MinGain is how much faster (relative) a policy's wake-up must be than
// none's to be chosen by auto: below it the policy would cost CPU (spin) or
// hold a host-wide setting (hold) for no measurable benefit.
const MinGain = 0.15

// ErrOneCPU is returned by Calibrate on a host with a single usable CPU,
// where there is no other CPU to wake.
var ErrOneCPU = errors.New("one usable CPU: no cross-CPU wake-up to calibrate")

// Calibrate measures none and, where they can work here, spin and hold
// (hold only when the cpuidle driver has a state it can forbid), alternating
// them rounds times for per (100 ms is plenty: ~10,000 round trips), and
// chooses the fastest if it beats none by MinGain; otherwise none.
func Calibrate(h Host, o Options, rounds int, per time.Duration) (*Calibration, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return &Calibration{Chosen: None, Why: ErrOneCPU.Error()}, nil
	}
	pols := []Policy{None, Spin}
	if h.DeepStates > 0 {
		pols = append(pols, Hold)
	}
	samples := map[Policy][]float64{}
	for r := 0; r < rounds; r++ {
		for _, p := range pols {
			held, err := Start(p, o)
			if err != nil {
				if p == None {
					return nil, err
				}
				continue // a policy that cannot start here is not a candidate
			}
			if p != None {
				time.Sleep(20 * time.Millisecond) // let the spinners settle on their CPUs
			}
			v, err := pingPong(cpus[0], cpus[1], per)
			held.Release()
			if err != nil {
				return nil, err
			}
			samples[p] = append(samples[p], v)
		}
	}
	c := &Calibration{OneWayUs: map[Policy]float64{}}
	for p, v := range samples {
		sort.Float64s(v)
		c.OneWayUs[p] = v[len(v)/2]
	}
	base := c.OneWayUs[None]
	c.Chosen = None
	best := base
	for _, p := range pols[1:] {
		if v, ok := c.OneWayUs[p]; ok && v < best && v <= base*(1-MinGain) {
			c.Chosen, best = p, v
		}
	}
	var parts []string
	for _, p := range pols {
		if v, ok := c.OneWayUs[p]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f µs", p, v))
		}
	}
	c.Why = fmt.Sprintf("cross-CPU wake-up one way: %s; ", strings.Join(parts, ", "))
	if c.Chosen == None {
		c.Why += fmt.Sprintf("no policy is %.0f%% faster than none", MinGain*100)
	} else {
		c.Why += fmt.Sprintf("%s is %.0f%% faster than none", c.Chosen, 100*(1-best/base))
	}
	return c, nil
}

// pingPong returns the mean one-way time in µs of one-byte messages over two
// pipes between a thread on CPU a and one on CPU b.
func pingPong(a, b int, per time.Duration) (float64, error) {
	var ab, ba [2]int
	if err := unix.Pipe2(ab[:], unix.O_CLOEXEC); err != nil {
		return 0, err
	}
	defer unix.Close(ab[0])
	defer unix.Close(ab[1])
	if err := unix.Pipe2(ba[:], unix.O_CLOEXEC); err != nil {
		return 0, err
	}
	defer unix.Close(ba[0])
	defer unix.Close(ba[1])
	echoErr := make(chan error, 1)
	go func() {
		// Locked and never unlocked: the thread, with its changed
		// affinity, is thrown away when this goroutine ends.
		runtime.LockOSThread()
		if err := pin(b); err != nil {
			echoErr <- err
			return
		}
		buf := []byte{0}
		for {
			if n, err := unix.Read(ab[0], buf); err != nil || n == 0 || buf[0] == 1 {
				echoErr <- nil
				return
			}
			if _, err := unix.Write(ba[1], buf); err != nil {
				echoErr <- err
				return
			}
		}
	}()
	res := make(chan struct {
		us  float64
		err error
	}, 1)
	go func() {
		runtime.LockOSThread()
		var out struct {
			us  float64
			err error
		}
		defer func() { res <- out }()
		if out.err = pin(a); out.err != nil {
			unix.Write(ab[1], []byte{1})
			return
		}
		buf := []byte{0}
		n := 0
		start := time.Now()
		for time.Since(start) < per {
			if _, err := unix.Write(ab[1], buf); err != nil {
				out.err = err
				return
			}
			if _, err := unix.Read(ba[0], buf); err != nil {
				out.err = err
				return
			}
			n++
		}
		el := time.Since(start)
		unix.Write(ab[1], []byte{1}) // tells the echo thread to end
		out.us = float64(el.Nanoseconds()) / float64(2*n) / 1e3
	}()
	r := <-res
	if err := <-echoErr; err != nil && r.err == nil {
		r.err = err
	}
	return r.us, r.err
}

func pin(cpu int) error {
	var s unix.CPUSet
	s.Set(cpu)
	if err := unix.SchedSetaffinity(0, &s); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return nil
}
