package driver

import (
	"os/exec"
	"path/filepath"
)

// ToolPaths finds every registered reference tool's program on $PATH, in
// driver name order, as absolute paths (what `image build --with-tools`
// carries); a missing one is the driver's one-line "apt-get install" error.
func ToolPaths() ([]string, error) {
	var out []string
	for _, name := range Names() {
		d, err := Lookup(name)
		if err != nil || name == "builtin" {
			continue
		}
		if err := d.Installed(); err != nil {
			return nil, err
		}
		p, err := exec.LookPath(name)
		if err != nil {
			return nil, err
		}
		if p, err = filepath.Abs(p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
