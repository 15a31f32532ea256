package experiment

import (
	"fmt"
	"strings"
	"time"
)

// SetText parses the overrides a command line gives as text (each "" keeps
// the file's): the warmup ("500ms"), the precision target ("5%") and the
// budget of a precision-driven run ("5m"). Errors wrap ErrInvalid.
func (o *Overrides) SetText(warmup, precision, budget string) error {
	if warmup != "" {
		w, err := time.ParseDuration(warmup)
		if err != nil {
			return fmt.Errorf("%w: --warmup %q: want a duration like 500ms or 0s", ErrInvalid, warmup)
		}
		o.Warmup = &w
	}
	if precision != "" {
		p, err := ParsePercent(precision)
		if err != nil {
			return fmt.Errorf("%w: --precision: %v", ErrInvalid, err)
		}
		o.Precision = &p
	}
	if budget != "" {
		b, err := time.ParseDuration(budget)
		if err != nil {
			return fmt.Errorf("%w: --budget %q: want a duration like 5m", ErrInvalid, budget)
		}
		o.Budget = &b
	}
	return nil
}

// ArmSet is names as a set, each checked against the experiment's arms
// (nil for no names: every arm). flag names the option in errors, which
// wrap ErrInvalid.
func (e *Experiment) ArmSet(flag string, names []string) (map[string]bool, error) {
	if len(names) == 0 {
		return nil, nil
	}
	have := map[string]bool{}
	var all []string
	for _, a := range e.Arms {
		have[a.Name] = true
		all = append(all, a.Name)
	}
	set := map[string]bool{}
	for _, a := range names {
		if !have[a] {
			return nil, fmt.Errorf("%w: %s: no arm %q (arms: %s)", ErrInvalid, flag, a, strings.Join(all, ", "))
		}
		set[a] = true
	}
	return set, nil
}
