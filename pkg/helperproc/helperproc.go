// Package helperproc runs a helper process of cnibench's own: a child that
// prints "ready" on its standard output once it is set up, and exits when
// its standard input closes — the wake-up spinner and the pressure server.
// Closing stdin as the stop signal means a helper never outlives a parent
// that dies without cleaning up: the pipe closes with the parent.
package helperproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// ErrTimeout is WaitReady's error when no line came in time.
var ErrTimeout = errors.New("helper not ready in time")

// Proc is a started helper process.
type Proc struct {
	Cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *strings.Builder
	ready  chan error
}

// Start starts cmd with start (exec.Cmd.Start, or netns.Start to run it in
// a network namespace), its stdin and stdout piped and its stderr kept. Its
// first stdout line is read in the background (see WaitReady), the rest is
// discarded so the helper never blocks on a full pipe.
func Start(cmd *exec.Cmd, start func(*exec.Cmd) error) (*Proc, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &Proc{Cmd: cmd, stdin: stdin, stderr: &strings.Builder{}, ready: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := start(cmd); err != nil {
		return nil, err
	}
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("unexpected %q", line)
		}
		p.ready <- err
		io.Copy(io.Discard, stdout)
	}()
	return p, nil
}

// WaitReady waits up to timeout for the "ready" line. It returns nil,
// ErrTimeout, or what came instead: the read's error (the helper exited
// first) or `unexpected "<line>"`.
func (p *Proc) WaitReady(timeout time.Duration) error {
	select {
	case err := <-p.ready:
		return err
	case <-time.After(timeout):
		return ErrTimeout
	}
}

// Stderr is what the helper wrote to its standard error, trimmed. Read it
// once the helper has exited (after Stop or Kill).
func (p *Proc) Stderr() string { return strings.TrimSpace(p.stderr.String()) }

// Stop closes the helper's stdin, on which it exits by itself, and waits up
// to grace for that; a helper still running then is killed. It returns
// Wait's error and whether the helper had to be killed.
func (p *Proc) Stop(grace time.Duration) (killed bool, err error) {
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.Cmd.Wait() }()
	select {
	case err := <-done:
		return false, err
	case <-time.After(grace):
		p.Cmd.Process.Kill()
		return true, <-done
	}
}

// Kill kills the helper at once and waits for it.
func (p *Proc) Kill() {
	p.Cmd.Process.Kill()
	p.Cmd.Wait()
}
