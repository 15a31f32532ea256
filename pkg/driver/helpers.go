package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// DefaultPorter is implemented by drivers whose tool listens on a known port
// when Spec.Port is 0. Measure uses it to know which port to wait for.
type DefaultPorter interface {
	DefaultPort() int
}

// ErrNotInstalled is matched (errors.Is) by every Driver.Installed error.
var ErrNotInstalled = errors.New("tool not installed")

// ErrNotSupported is matched by every Driver.Supports error: the tool has no
// such test, or cannot run it as asked.
var ErrNotSupported = errors.New("not supported by this engine")

// kindError is a one-line message that also matches a sentinel.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// NotSupported formats a Supports error that matches ErrNotSupported.
func NotSupported(format string, a ...any) error {
	return &kindError{ErrNotSupported, fmt.Sprintf(format, a...)}
}

// NotInstalled formats an Installed error that matches ErrNotInstalled.
func NotInstalled(format string, a ...any) error {
	return &kindError{ErrNotInstalled, fmt.Sprintf(format, a...)}
}

// CheckInstalled returns nil when bin is on $PATH, else the one-line error the
// Driver.Installed contract asks for: "<bin> is not installed: apt-get install <pkg>".
func CheckInstalled(bin, aptPkg string) error {
	if _, err := exec.LookPath(bin); err != nil {
		return NotInstalled("%s is not installed: apt-get install %s", bin, aptPkg)
	}
	return nil
}

// RunVersion runs argv (a tool's version flag) with a short timeout and
// returns its combined output, for Driver.Version implementations.
func RunVersion(argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil && len(bytes.TrimSpace(out)) == 0 {
		return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return string(out), nil
}

// WholeSeconds converts a duration to the whole seconds that tools taking an
// integer -t accept. It refuses fractions instead of silently rounding, so the
// measured interval is the one asked for.
func WholeSeconds(tool string, d time.Duration) (int, error) {
	if d <= 0 {
		return 0, fmt.Errorf("%s: duration must be positive, got %s", tool, d)
	}
	if d%time.Second != 0 {
		return 0, fmt.Errorf("%s takes whole seconds; duration %s is not (use e.g. %ds)", tool, d, int(math.Ceil(d.Seconds())))
	}
	return int(d / time.Second), nil
}

// Itoa is strconv.Itoa, shortened for argv building.
func Itoa(n int) string { return strconv.Itoa(n) }

// StripANSI removes terminal colour escapes (ESC [ ... letter), which some
// tools (sockperf) print even when stdout is not a terminal.
func StripANSI(b []byte) []byte {
	var out bytes.Buffer
	for i := 0; i < len(b); i++ {
		if b[i] == 0x1b && i+1 < len(b) && b[i+1] == '[' {
			j := i + 2
			for j < len(b) && (b[j] < 0x40 || b[j] > 0x7e) {
				j++
			}
			i = j // skip the final letter too
			continue
		}
		out.WriteByte(b[i])
	}
	return out.Bytes()
}

// WithPort appends flag and port to argv when port is set; 0 leaves the
// tool on its default port.
func WithPort(argv []string, flag string, port int) []string {
	if port == 0 {
		return argv
	}
	return append(argv, flag, Itoa(port))
}

// CheckClient returns the refusals every ClientCommand starts with: a test
// d does not run, or a spec with no server address. d is a Driver, or the
// Tool one is made of.
func CheckClient(d interface {
	Name() string
	Supports(test string) error
}, spec Spec) error {
	if err := d.Supports(spec.Test); err != nil {
		return err
	}
	if spec.Server == "" {
		return fmt.Errorf("%s: no server address given", d.Name())
	}
	return nil
}
