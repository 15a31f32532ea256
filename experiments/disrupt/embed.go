// Package disrupt holds the ready disruption experiments (cnibench
// disrupt run NAME), embedded in the binary; their format is in
// docs/disruption.md. They live apart from the measurement experiments
// one folder up, whose format is another.
package disrupt

import "embed"

// Files are the *.yaml disruption experiments in this folder.
//
//go:embed *.yaml
var Files embed.FS
