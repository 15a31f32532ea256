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
	spec, err := prepare(d, spec)
	if err != nil {
		return nil, err
	}
	argv, err := d.ClientCommand(spec)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, spec.Duration+spec.Warmup+ClientMargin)
	defer cancel()
	var stdout bytes.Buffer
	cli, err := startProcess(cctx, clientNS, spec.ClientCPU, argv, &stdout)
	if err != nil {
		return nil, fmt.Errorf("start %s client in netns %q: %w", name, clientNS, err)
	}
	ClientStarted(ctx)
	<-cli.done
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", name, ctx.Err())
	}
	if cctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("%s client did not finish within %s (killed): %s", name,
			spec.Duration+spec.Warmup+ClientMargin, tailLine(cli.stderr.String()))
	}
	r, perr := d.Parse(spec, stdout.Bytes())
	if cli.waitErr != nil {
		return nil, fmt.Errorf("%s client failed (%v): %s", name, cli.waitErr, tailLine(cli.stderr.String()))
	}
	if perr != nil {
		return nil, fmt.Errorf("%s: %w", name, perr)
	}
	if r.Tool.Name == "" {
		r.Tool.Name = name
	}
	if len(r.Tool.Command) == 0 {
		r.Tool.Command = argv
	}
	if r.Start.IsZero() {
		r.Start = cli.started
	}
	fillProcessCPU(r, "client", cli.cmd.ProcessState, cli.ended.Sub(cli.started).Seconds())
	return r, nil
}
