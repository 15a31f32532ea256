package driver

import (
	"fmt"
	"slices"
	"strings"
)

// Tool is what a reference tool's driver knows of the program without
// measuring anything. Its methods are the Name, DefaultPort, Supports,
// Installed and Version of the Driver interface, so a tool's driver embeds
// a *Tool and writes only its commands and its parser. A Tool comes from
// NewTool; the zero Tool is no tool.
type Tool struct {
	bin          string
	port         int
	runs         []string
	refusals     []refusal
	oneStream    string // see OneStream
	parseVersion func(out string) (string, error)
}

// refusal is how a tool turns down some tests it does not run.
type refusal struct {
	tests []string
	why   string // a format whose one %s is the test asked for
}

// NewTool describes the program bin, which is also the engine name and the
// Debian package that installs it (one name for every tool so far). It
// listens on port when no port is given, has the tests runs (in the order an
// unknown test's error lists them), and its version is parseVersion of what
// `bin --version` prints.
func NewTool(bin string, port int, parseVersion func(out string) (string, error), runs ...string) *Tool {
	return &Tool{bin: bin, port: port, runs: runs, parseVersion: parseVersion}
}

// Refuse makes Supports turn down tests with why, a format whose one %s is
// the test asked for, saying what the tool lacks and which engine to use
// instead. It returns t, so a driver's declaration reads as one expression.
func (t *Tool) Refuse(why string, tests ...string) *Tool {
	t.refusals = append(t.refusals, refusal{tests, why})
	return t
}

// OneStream makes CheckClient refuse a spec with more than one stream
// (Parallel > 1) with why, a format whose one %d is the streams asked for:
// the tool runs one connection per test, and why says which engine runs
// more. It returns t, like Refuse.
func (t *Tool) OneStream(why string) *Tool {
	t.oneStream = why
	return t
}

// CheckClient returns the refusals the tool's ClientCommand starts with:
// those of the package's CheckClient, and more than one stream for a tool
// that runs one.
func (t *Tool) CheckClient(spec Spec) error {
	if err := CheckClient(t, spec); err != nil {
		return err
	}
	if t.oneStream != "" && spec.Parallel > 1 {
		return fmt.Errorf(t.oneStream, spec.Parallel)
	}
	return nil
}

// Name implements Driver.
func (t *Tool) Name() string { return t.bin }

// DefaultPort implements DefaultPorter.
func (t *Tool) DefaultPort() int { return t.port }

// Supports implements Driver: nil for a test the tool runs, the words of
// Refuse for one it was told to refuse, else an unknown-test error that
// lists the tests it runs.
func (t *Tool) Supports(test string) error {
	if slices.Contains(t.runs, test) {
		return nil
	}
	for _, r := range t.refusals {
		if slices.Contains(r.tests, test) {
			return NotSupported(r.why, test)
		}
	}
	return NotSupported("%s: unknown test %q (%s runs %s)", t.bin, test, t.bin, strings.Join(t.runs, ", "))
}

// Installed implements Driver.
func (t *Tool) Installed() error { return CheckInstalled(t.bin, t.bin) }

// Version implements Driver.
func (t *Tool) Version() (string, error) {
	out, err := RunVersion(t.bin, "--version")
	if err != nil {
		return "", err
	}
	return t.parseVersion(out)
}
