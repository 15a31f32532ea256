// Package builtin puts cnibench's own engine behind the driver interface, so
// an experiment or crosscheck can run it exactly like the reference tools:
// `cnibench server` on one side, `cnibench client ... --json` on the other,
// each in its network namespace, parsed from the client's result.Set.
package builtin

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/limits"
	"github.com/cnibench/cnibench/pkg/result"
)

// Binary is the cnibench executable the commands run. Empty means
// $CNIBENCH_BIN if set, else the running executable (os.Executable), which is
// right when the caller is cnibench itself.
var Binary string

func init() { driver.Register(Driver{}) }

// Driver is the built-in engine's driver.
type Driver struct{}

// Name implements driver.Driver.
func (Driver) Name() string { return "builtin" }

// DefaultPort implements driver.DefaultPorter.
func (Driver) DefaultPort() int { return limits.DefaultPort }

// Supports implements driver.Driver: the engine has every test.
func (Driver) Supports(test string) error {
	if !result.ValidTest(test) {
		return driver.NotSupported("builtin: unknown test %q (known: %s)", test, strings.Join(result.Tests, ", "))
	}
	return nil
}

// Bin resolves the cnibench binary (see Binary).
func Bin() (string, error) {
	if Binary != "" {
		return Binary, nil
	}
	if b := os.Getenv("CNIBENCH_BIN"); b != "" {
		return b, nil
	}
	b, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find the cnibench binary (%v): set CNIBENCH_BIN", err)
	}
	return b, nil
}

// Installed implements driver.Driver.
func (Driver) Installed() error {
	b, err := Bin()
	if err != nil {
		return err
	}
	st, err := os.Stat(b)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return driver.NotInstalled("cnibench binary %q is not an executable: build it with `make build` and set CNIBENCH_BIN", b)
	}
	return nil
}

// Version implements driver.Driver ("cnibench v0.1" → "v0.1").
func (Driver) Version() (string, error) {
	b, err := Bin()
	if err != nil {
		return "", err
	}
	out, err := driver.RunVersion(b, "version")
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != "cnibench" {
		return "", fmt.Errorf("%s version printed %q, expected \"cnibench <version>\"", b, strings.TrimSpace(out))
	}
	return f[1], nil
}

// ServerCommand implements driver.Driver: `cnibench server --listen :PORT`.
func (Driver) ServerCommand(spec driver.Spec) ([]string, error) {
	b, err := Bin()
	if err != nil {
		return nil, err
	}
	port := spec.Port
	if port == 0 {
		port = limits.DefaultPort
	}
	return []string{b, "server", "--listen", fmt.Sprintf(":%d", port)}, nil
}

// ClientCommand implements driver.Driver: `cnibench client ... --json` for
// exactly one (test, size), so Parse finds exactly one result.
func (d Driver) ClientCommand(spec driver.Spec) ([]string, error) {
	if err := driver.CheckClient(d, spec); err != nil {
		return nil, err
	}
	if spec.Duration <= 0 {
		return nil, fmt.Errorf("builtin: duration must be positive, got %s", spec.Duration)
	}
	// The engine's own limits, so a size the client would refuse is refused
	// here, where an experiment is checked, not in every child client.
	if err := limits.CheckSize(spec.Test, spec.MsgSize); err != nil {
		return nil, fmt.Errorf("builtin %s: %w", spec.Test, err)
	}
	b, err := Bin()
	if err != nil {
		return nil, err
	}
	argv := []string{b, "client", "--server", spec.Server}
	argv = driver.WithPort(argv, "--port", spec.Port)
	par := spec.Parallel
	if par < 1 {
		par = 1
	}
	argv = append(argv, "--test", spec.Test, "--msg-size", driver.Itoa(spec.MsgSize),
		"--duration", spec.Duration.String(), "--warmup", durOrZero(spec.Warmup),
		"--parallel", driver.Itoa(par))
	if spec.RateBps > 0 {
		argv = append(argv, "--rate", strconv.FormatFloat(spec.RateBps, 'f', 0, 64))
	}
	return append(argv, "--json"), nil
}

func durOrZero(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return d.String()
}

// Parse implements driver.Driver: the client's --json result.Set must hold
// exactly one result for spec's test and message size.
func (d Driver) Parse(spec driver.Spec, stdout []byte) (*result.Result, error) {
	set, err := result.DecodeSet(stdout)
	if err != nil {
		return nil, fmt.Errorf("cnibench client output: %w", err)
	}
	var found *result.Result
	for _, r := range set.Results {
		if r.Test == spec.Test && r.MsgSizeBytes == spec.MsgSize {
			if found != nil {
				return nil, fmt.Errorf("cnibench client output has more than one %s result at %d bytes", spec.Test, spec.MsgSize)
			}
			found = r
		}
	}
	if found == nil {
		return nil, fmt.Errorf("cnibench client output has no %s result at %d bytes (it has %d results)", spec.Test, spec.MsgSize, len(set.Results))
	}
	if len(found.Tool.Command) == 0 {
		if argv, err := d.ClientCommand(spec); err == nil {
			found.Tool.Command = argv
		}
	}
	return found, nil
}
