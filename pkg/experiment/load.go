package experiment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/cnibench/cnibench/experiments"
)

// ReadyNames lists the ready experiments embedded in the binary.
func ReadyNames() []string {
	names, _ := fs.Glob(experiments.Files, "*.yaml")
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, ".yaml")
	}
	return names
}

// Load reads an experiment file, or a ready experiment by name when no such
// file exists, and checks it (see ParseIn). Every error wraps ErrInvalid.
func Load(ref string) (*Experiment, error) {
	if _, err := os.Stat(ref); err == nil {
		e, err := LoadFile(ref)
		if err != nil && !errors.Is(err, ErrInvalid) { // an unreadable file
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if err != nil {
			return nil, err
		}
		return e, nil
	}
	name := strings.TrimSuffix(ref, ".yaml") + ".yaml"
	b, err := fs.ReadFile(experiments.Files, name)
	if err != nil {
		return nil, fmt.Errorf("%w: no experiment file %q and no ready experiment of that name (ready: %s)", ErrInvalid, ref, strings.Join(ReadyNames(), ", "))
	}
	return Parse(b, "experiments/"+name)
}
