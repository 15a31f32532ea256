package driver

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cnibench/cnibench/pkg/result"
)

// MeasureClient runs only d's client, in clientNS, against a server that is
// already running (an experiment arm with a server_address). It applies the
// same deadline, parsing and client-side CPU accounting as Measure; the
// server side's CPU is the server's to report, or missing.
func MeasureClient(ctx context.Context, d Driver, spec Spec, clientNS string) (*result.Result, error) {
	name := d.Name()
	spec, _, argv, err := prepare(d, spec, false)
	if err != nil {
		return nil, err
	}
	cli, stdout, timedOut, err := runClient(ctx, name, spec, clientNS, argv)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", name, ctx.Err())
	}
	if timedOut {
		return nil, fmt.Errorf("%s client did not finish within %s (killed): %s", name,
			spec.Duration+spec.Warmup+ClientMargin, tailLine(cli.stderr.String()))
	}
	r, perr := d.Parse(spec, stdout)
	if cli.waitErr != nil {
		return nil, fmt.Errorf("%s client failed (%v): %s", name, cli.waitErr, tailLine(cli.stderr.String()))
	}
	if perr != nil {
		return nil, fmt.Errorf("%s: %w", name, perr)
	}
	fillFromClient(r, name, argv, cli)
	return r, nil
}

// runClient runs argv, d's client, in clientNS under the client deadline
// (duration + warmup + ClientMargin), announcing its start (ClientStarted),
// and returns once it has exited. timedOut tells that the deadline, not the
// tool, ended it.
func runClient(ctx context.Context, name string, spec Spec, clientNS string, argv []string) (cli *process, stdout []byte, timedOut bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, spec.Duration+spec.Warmup+ClientMargin)
	defer cancel()
	var out bytes.Buffer
	cli, err = startProcess(cctx, clientNS, spec.ClientCPU, argv, &out)
	if err != nil {
		return nil, nil, false, fmt.Errorf("start %s client in netns %q: %w", name, clientNS, err)
	}
	ClientStarted(ctx)
	<-cli.done
	return cli, out.Bytes(), cctx.Err() == context.DeadlineExceeded, nil
}

// fillFromClient fills what the tool's output did not give from how its
// client ran: the tool's name and command, the start time and the client's
// process CPU. It returns the client's wall time in seconds.
func fillFromClient(r *result.Result, name string, argv []string, cli *process) (wall float64) {
	if r.Tool.Name == "" {
		r.Tool.Name = name
	}
	if len(r.Tool.Command) == 0 {
		r.Tool.Command = argv
	}
	if r.Start.IsZero() {
		r.Start = cli.started
	}
	wall = cli.ended.Sub(cli.started).Seconds()
	fillProcessCPU(r, "client", cli.cmd.ProcessState, wall)
	return wall
}
