package errkind

import (
	"errors"
	"io/fs"
	"testing"
)

func TestWrapKeepsMessageAndMatchesBoth(t *testing.T) {
	kind := errors.New("invalid input")
	err := Wrap(kind, fs.ErrNotExist)
	if err.Error() != fs.ErrNotExist.Error() || !errors.Is(err, kind) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Wrap: %q, is kind %v, is cause %v", err, errors.Is(err, kind), errors.Is(err, fs.ErrNotExist))
	}
	if Wrap(kind, nil) != nil {
		t.Error("Wrap(kind, nil) is not nil")
	}
	err = Errorf(kind, "--last %d: want ≥ 0: %w", -1, fs.ErrInvalid)
	if err.Error() != "--last -1: want ≥ 0: invalid argument" || !errors.Is(err, kind) || !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Errorf: %q", err)
	}
	if errors.Is(Errorf(kind, "x"), fs.ErrNotExist) {
		t.Error("matches a kind it was not given")
	}
}
