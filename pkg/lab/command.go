package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/cnibench/cnibench/pkg/netns"
)

// UpCommand is `cnibench lab up` as given.
type UpCommand struct {
	Topology string   // a preset name or a topology file
	Sets     []string // knob key=value pairs
	Name     string   // "" = <preset>-<id>
	Quiet    bool     // no progress lines
}

// Run checks the topology and knobs (an ErrInvalid error, before anything
// is created), builds the lab and prints its endpoints to out; progress
// lines go to log unless Quiet.
func (c UpCommand) Run(ctx context.Context, out, log io.Writer) error {
	if c.Quiet {
		log = nil // UpOptions.Log: nil is silent
	}
	knobs, err := ParseSets(c.Sets)
	if err != nil {
		return err
	}
	spec, err := Resolve(c.Topology, "", knobs) // its errors match ErrInvalid
	if err != nil {
		return err
	}
	start := time.Now()
	l, err := Up(ctx, spec, UpOptions{Name: c.Name, Log: log})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "lab %s up (%s, %d pods) in %v\n", l.Name, l.Preset, l.Pods, time.Since(start).Round(time.Microsecond))
	l.WriteEndpoints(out)
	return nil
}

// Show is `cnibench lab show`: the named lab. A lab that cannot be read,
// as for ExecIn, is input the user fixes (ErrInvalid).
func Show(name string) (*Lab, error) {
	l, err := Get(name)
	if err != nil {
		return nil, invalidError{err}
	}
	return l, nil
}

// ListPrint is `cnibench lab list`: the table of every readable lab, then
// an error naming each state file that could not be read.
func ListPrint(w io.Writer) error {
	labs, err := List()
	return errors.Join(err, WriteList(w, labs))
}

// DownNamed is `cnibench lab down`: Down of the named lab. Like CNI DEL,
// removing a lab that is not there succeeds (with a note on log).
func DownNamed(ctx context.Context, name string, out, log io.Writer) error {
	start := time.Now()
	l, err := Get(name)
	if errors.Is(err, ErrNoLab) {
		fmt.Fprintf(log, "lab %s: not found, nothing to remove (see `cnibench lab list`)\n", name)
		return nil
	}
	if err != nil {
		return err
	}
	if err := l.Down(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "lab %s down in %v\n", l.Name, time.Since(start).Round(time.Microsecond))
	return nil
}

// CleanPrint is `cnibench lab clean`: Clean, or CleanID when id is set,
// printing every object removed and the count (also after an error).
func CleanPrint(ctx context.Context, id string, out io.Writer) error {
	start := time.Now()
	var removed []string
	var err error
	if id != "" {
		removed, err = CleanID(ctx, id)
	} else {
		removed, err = Clean(ctx)
	}
	for _, r := range removed {
		fmt.Fprintln(out, "removed", r)
	}
	fmt.Fprintf(out, "clean: %d objects removed in %v\n", len(removed), time.Since(start).Round(time.Microsecond))
	return err
}

// ExecIn replaces this process with argv inside the namespace of the named
// lab's endpoint (as `ip netns exec`: signals reach the command and its exit
// status is ours). An unknown lab, endpoint or program is an ErrInvalid
// error; on success ExecIn does not return.
func ExecIn(name, endpoint string, argv []string) error {
	l, err := Get(name)
	if err != nil {
		return invalidError{err}
	}
	ep, err := l.Endpoint(endpoint)
	if err != nil {
		return invalidError{err}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return invalidError{fmt.Errorf("lab exec: %w", err)}
	}
	argv = append([]string{path}, argv[1:]...)
	return fmt.Errorf("lab exec: %w", netns.Exec(ep.Netns, argv, os.Environ()))
}
