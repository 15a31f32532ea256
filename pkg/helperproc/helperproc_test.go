package helperproc

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// start runs script under sh as a helper started by exec.Cmd.Start.
func start(t *testing.T, script string) *Proc {
	t.Helper()
	p, err := Start(exec.Command("sh", "-c", script), (*exec.Cmd).Start)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A helper that says ready and exits on EOF: ready, stopped without a kill.
func TestReadyThenStopOnEOF(t *testing.T) {
	p := start(t, "echo ready; cat >/dev/null")
	if err := p.WaitReady(5 * time.Second); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	if killed, err := p.Stop(5 * time.Second); killed || err != nil {
		t.Errorf("Stop: killed %v, %v; want a clean exit on EOF", killed, err)
	}
}

// Another first line is named in the error, and stderr is kept.
func TestUnexpectedLine(t *testing.T) {
	p := start(t, "echo oops >&2; echo listening; cat >/dev/null")
	err := p.WaitReady(5 * time.Second)
	if err == nil || err.Error() != `unexpected "listening\n"` {
		t.Errorf("WaitReady: %v; want unexpected \"listening\\n\"", err)
	}
	p.Stop(5 * time.Second)
	if p.Stderr() != "oops" {
		t.Errorf("Stderr %q, want oops", p.Stderr())
	}
}

// A helper that exits before a line: the read's error, at once.
func TestExitBeforeReady(t *testing.T) {
	p := start(t, "exit 3")
	err := p.WaitReady(5 * time.Second)
	if err == nil || errors.Is(err, ErrTimeout) {
		t.Errorf("WaitReady: %v; want the read's error", err)
	}
	if _, err := p.Stop(time.Second); !strings.Contains(fmt.Sprint(err), "exit status 3") {
		t.Errorf("Stop: %v; want exit status 3", err)
	}
}

// No line in time is ErrTimeout; a helper deaf to EOF is killed after the
// grace time.
func TestTimeoutAndKill(t *testing.T) {
	p := start(t, "exec sleep 30")
	if err := p.WaitReady(100 * time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Errorf("WaitReady: %v; want ErrTimeout", err)
	}
	t0 := time.Now()
	killed, _ := p.Stop(200 * time.Millisecond)
	if !killed || time.Since(t0) > 5*time.Second {
		t.Errorf("Stop: killed %v after %v; want killed after the 200ms grace", killed, time.Since(t0))
	}
}
