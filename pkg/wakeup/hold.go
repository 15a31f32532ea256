package wakeup

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
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
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("wake-up policy spin: start %s: %w", exe, err)
	}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
		io.Copy(io.Discard, stdout)
	}()
	stop := func() error {
		stdin.Close() // EOF: the spinner exits by itself
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Second):
			cmd.Process.Kill()
			return <-done
		}
	}
	select {
	case err := <-ready:
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("wake-up policy spin: spinner did not start: %v %s", err, strings.TrimSpace(stderr.String()))
		}
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, errors.New("wake-up policy spin: spinner not ready after 5s")
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
