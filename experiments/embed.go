// Package experiments holds the ready experiment files, embedded so that
// `cnibench run default` works from the binary alone.
package experiments

import "embed"

// Files are the *.yaml experiments in this folder.
//
//go:embed *.yaml
var Files embed.FS
