// Package errkind gives an error a kind that errors.Is matches without
// changing its message: a package's ErrInvalid on a flag error that must
// still read "--format "pdf": want …", so the command line can exit 2 for
// it and print it as it is.
package errkind

import "fmt"

type kindError struct{ kind, err error }

func (e kindError) Error() string   { return e.err.Error() }
func (e kindError) Unwrap() []error { return []error{e.kind, e.err} }

// Wrap returns err, with its message, also matching kind; nil stays nil.
func Wrap(kind, err error) error {
	if err == nil {
		return nil
	}
	return kindError{kind, err}
}

// Errorf is Wrap(kind, fmt.Errorf(format, a...)).
func Errorf(kind error, format string, a ...any) error {
	return kindError{kind, fmt.Errorf(format, a...)}
}
