// Command cnibench measures, compares and tunes container network datapaths.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/cnibench/cnibench/internal/cli"
	"github.com/cnibench/cnibench/pkg/inheritfd"
	"github.com/cnibench/cnibench/pkg/wakeup"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == wakeup.SpinArg {
		wakeup.Main() // the --wakeup spin helper process; never returns
	}
	// A lab's daemons outlive the command: they must not keep its
	// caller's lock or pipe open (see package inheritfd).
	if err := inheritfd.CloseOnExec(); err != nil {
		fmt.Fprintln(os.Stderr, "cnibench:", err)
		os.Exit(1)
	}
	// Ctrl-C, a supervisor's SIGTERM and a closed terminal's SIGHUP all end
	// a command the same way: its context is cancelled, so every lab, host
	// change and child process it made is undone before it exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, unix.SIGTERM, unix.SIGHUP)
	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cnibench:", err)
		os.Exit(cli.ExitCode(err))
	}
}
