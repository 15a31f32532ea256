package probe

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText prints the report a capability a line: id, yes/no/undecided,
// and how it was found.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "kernel %s, probed in %v\n", r.Kernel, r.Took.Round(1e6))
	for _, c := range r.Capabilities {
		state := "undecided"
		if c.Supported != nil {
			state = map[bool]string{true: "yes", false: "no"}[*c.Supported]
		}
		detail := c.How
		if c.Detail != "" {
			detail += ": " + c.Detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.ID, state, detail)
	}
	return tw.Flush()
}
