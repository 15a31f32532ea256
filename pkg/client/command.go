package client

import (
	"context"
	"fmt"
	"io"

	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/report"
)

// Help is `cnibench client --help`'s description.
const Help = `Run one or more tests against a server, one result per (test, message size).
Tests: tcp_lat udp_lat tcp_crr tcp_bw udp_bw. Sizes: 1, 64, 1K, 4K, 64K (K = 1024).
Rates (udp_bw): bits/s, 100M, 2G. --engine qperf|iperf3|sockperf measures the same
through a reference tool (its server must be running on --server).`

// Examples is `cnibench client --help`'s examples.
const Examples = `  cnibench client --server 10.0.0.2 --test tcp_lat,udp_lat --msg-size 1,1K
  cnibench client --server 10.0.0.2 --test udp_bw --msg-size 64 --rate 500M --json`

// Command is `cnibench client` as given.
type Command struct {
	Flags
	Profile profile.Flags
	JSON    bool // print one JSON document instead of the table
	// LogStdout sends progress to out, ahead of the result, instead of to
	// log: a pod's log merges stdout and stderr read from two pipes, so a
	// progress line written just before the JSON could land inside it;
	// k8s run's client pods send both through stdout, in order.
	LogStdout bool
}

// Run checks the flags (ErrInvalid and profile.ErrInvalid errors) and opens
// the profiler, both before anything is measured, then measures the plan
// and prints the results to out; progress goes to log (or out, LogStdout).
func (c Command) Run(ctx context.Context, out, log io.Writer) error {
	if c.LogStdout {
		log = out
	}
	p, err := c.Plan()
	if err != nil {
		return err
	}
	po, err := c.Profile.Options()
	if err != nil {
		return err
	}
	var sess *profile.Session
	if po != nil {
		if sess, err = profile.Open(*po); err != nil {
			return fmt.Errorf("--profile: %w", err)
		}
		defer sess.Close()
	}
	set, err := Run(ctx, p, sess, log)
	if err != nil {
		return err
	}
	if c.JSON {
		return report.WriteJSON(out, set)
	}
	return WriteTable(out, set)
}
