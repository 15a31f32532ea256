package wakeup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/helperproc"
)

// SpinArg is the first argument that makes the cnibench binary run as the
// spinner (see Main): a process of its own, so a CPU profile shows its time
// under its own name, not as the engine's.
const SpinArg = "__cnb-spin"

// SpinComm is the spinner's process name (/proc/PID/comm).
const SpinComm = "cnb-spin"

// Held is a policy in force until Release.
type Held struct {
	Policy Policy
	// Pid is the spinner's process id (spin only).
	Pid     int
	release func() error
}

// Release ends the policy. It is safe to call more than once.
func (h *Held) Release() error {
	if h == nil || h.release == nil {
		return nil
	}
	r := h.release
	h.release = nil
	return r()
}

// Options says where the policies act.
type Options struct {
	// Exe is the cnibench binary the spinner runs from.
	Exe string
	// DMALatency is the device hold writes (default /dev/cpu_dma_latency).
	DMALatency string
}

// Start puts p in force (None and "" do nothing). Auto must be resolved first.
func Start(p Policy, o Options) (*Held, error) {
	switch p {
	case None, "":
		return &Held{Policy: None}, nil
	case Hold:
		dev := o.DMALatency
		if dev == "" {
			dev = "/dev/cpu_dma_latency"
		}
		f, err := os.OpenFile(dev, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("wake-up policy hold: %w (needs root; or use --wakeup spin)", err)
		}
		var b [4]byte // an s32 in microseconds: 0 = no idle state with an exit latency
		binary.NativeEndian.PutUint32(b[:], 0)
		if _, err := f.Write(b[:]); err != nil {
			f.Close()
			return nil, fmt.Errorf("wake-up policy hold: write %s: %w", dev, err)
		}
		return &Held{Policy: Hold, release: f.Close}, nil
	case Spin:
		return startSpin(o.Exe)
	}
	return nil, fmt.Errorf("%w %q: resolve auto before starting", ErrInvalid, p)
}

// startSpin runs the spinner and waits until every CPU has its thread.
func startSpin(exe string) (*Held, error) {
	if exe == "" {
		return nil, errors.New("wake-up policy spin: no cnibench binary to run the spinner from")
	}
	cmd := exec.Command(exe, SpinArg)
	// Dies with us even on SIGKILL, so nothing is ever left spinning.
	cmd.SysProcAttr = &unix.SysProcAttr{Pdeathsig: unix.SIGKILL, Setpgid: true}
	hp, err := helperproc.Start(cmd, (*exec.Cmd).Start)
	if err != nil {
		return nil, fmt.Errorf("wake-up policy spin: start %s: %w", exe, err)
	}
	switch err := hp.WaitReady(5 * time.Second); {
	case errors.Is(err, helperproc.ErrTimeout):
		hp.Kill()
		return nil, errors.New("wake-up policy spin: spinner not ready after 5s")
	case err != nil:
		hp.Kill()
		return nil, fmt.Errorf("wake-up policy spin: spinner did not start: %v %s", err, hp.Stderr())
	}
	// EOF on its stdin: the spinner exits by itself.
	stop := func() error {
		_, err := hp.Stop(2 * time.Second)
		return err
	}
	return &Held{Policy: Spin, Pid: cmd.Process.Pid, release: stop}, nil
}

// Main is the spinner process: one SCHED_IDLE, nice 19 thread pinned to each
// CPU this process may run on, spinning until stdin closes. It never returns.
func Main() {
	// The leader's name is what /proc/PID/comm and a profile show.
	_ = os.WriteFile("/proc/self/comm", []byte(SpinComm), 0)
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		fmt.Fprintln(os.Stderr, "sched_getaffinity:", err)
		os.Exit(1)
	}
	var cpus []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	runtime.GOMAXPROCS(len(cpus) + 1)
	var stop atomic.Bool
	errs := make(chan error, len(cpus))
	for _, c := range cpus {
		go func(cpu int) {
			runtime.LockOSThread() // never unlocked: the thread exits with the process
			var one unix.CPUSet
			one.Set(cpu)
			if err := unix.SchedSetaffinity(0, &one); err != nil {
				errs <- fmt.Errorf("cpu %d: affinity: %w", cpu, err)
				return
			}
			// Per thread on Linux: nice 19 files the time under "nice" in
			// /proc/stat; SCHED_IDLE lets any waking task preempt at once.
			_ = unix.Setpriority(unix.PRIO_PROCESS, 0, 19)
			if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
				errs <- fmt.Errorf("cpu %d: SCHED_IDLE: %w", cpu, err)
				return
			}
			errs <- nil
			// No PAUSE instruction: on a VM a pause loop can trigger
			// pause-loop exits, the very host round trip this avoids.
			for !stop.Load() {
			}
		}(c)
	}
	for range cpus {
		if err := <-errs; err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	stop.Store(true)
	os.Exit(0)
}
