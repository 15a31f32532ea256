package stages

import (
	"fmt"
	"html"
	"maps"
	"slices"
	"strings"
)

// flameNode is one frame in the merged call tree.
type flameNode struct {
	name     string
	count    uint64
	children map[string]*flameNode
}

func (n *flameNode) child(name string) *flameNode {
	if n.children == nil {
		n.children = map[string]*flameNode{}
	}
	c := n.children[name]
	if c == nil {
		c = &flameNode{name: name}
		n.children[name] = c
	}
	return c
}

// FlameSVG draws folded stacks as a self-contained flame graph (roots at
// the bottom, children sorted by name as in Brendan Gregg's flamegraph.pl,
// no script): each frame is a box as wide as its samples, coloured by the
// stage its function names (grey when it names none), with a tooltip of
// its samples and share. Frames narrower than minPx are left out.
func FlameSVG(stacks map[string]uint64, title string) string {
	const width, rowH, minPx, fontPx = 1000.0, 16, 0.8, 11
	root := &flameNode{name: "all"}
	depth := 0
	for st, n := range stacks {
		root.count += n
		node := root
		frames := strings.Split(st, ";")
		for _, f := range frames {
			node = node.child(f)
			node.count += n
		}
		depth = max(depth, len(frames))
	}
	if root.count == 0 {
		return ""
	}
	height := (depth+1)*rowH + 24
	var b strings.Builder
	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"monospace\" font-size=\"%d\" role=\"img\" aria-label=\"%s\">\n",
		int(width), height, fontPx, html.EscapeString(title))
	fmt.Fprintf(&b, "<text x=\"0\" y=\"14\" font-size=\"13\">%s (%d samples)</text>\n", html.EscapeString(title), root.count)
	scale := width / float64(root.count)
	var draw func(n *flameNode, x float64, level int)
	draw = func(n *flameNode, x float64, level int) {
		w := float64(n.count) * scale
		if w < minPx {
			return
		}
		y := height - (level+1)*rowH
		fill := "#d0d0d0"
		if level > 0 {
			if s := Of(n.name); s != "" {
				fill = colour(s)
			} else if n.name == "[user]" || level == 1 {
				fill = "#f0c890"
			}
		}
		fmt.Fprintf(&b, "<g><title>%s: %d samples, %.2f%%</title><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.5\"/>",
			html.EscapeString(n.name), n.count, 100*float64(n.count)/float64(root.count), x, y, w, rowH-1, fill)
		if maxChars := int((w - 4) / (fontPx * 0.62)); maxChars >= 3 {
			label := n.name
			if len(label) > maxChars {
				label = label[:maxChars-2] + ".."
			}
			fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%d\">%s</text>", x+2, y+rowH-4, html.EscapeString(label))
		}
		b.WriteString("</g>\n")
		names := slices.Sorted(maps.Keys(n.children))
		for _, k := range names {
			c := n.children[k]
			draw(c, x, level+1)
			x += float64(c.count) * scale
		}
	}
	draw(root, 0, 0)
	b.WriteString("</svg>\n")
	return b.String()
}
