package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// voidElements have no end tag in HTML.
var voidElements = map[string]bool{"meta": true, "br": true, "hr": true, "img": true, "input": true, "link": true}

// checkHTML tokenizes the page strictly: every non-void element closed in
// order, nothing fetched from elsewhere, and every inline SVG well-formed XML.
func checkHTML(t *testing.T, page []byte) (svgs int) {
	t.Helper()
	if _, err := html.Parse(bytes.NewReader(page)); err != nil {
		t.Fatalf("html.Parse: %v", err)
	}
	z := html.NewTokenizer(bytes.NewReader(page))
	var stack []string
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() != io.EOF {
				t.Fatalf("tokenize: %v", z.Err())
			}
			break
		}
		tok := z.Token()
		switch tt {
		case html.StartTagToken:
			for _, a := range tok.Attr {
				if a.Key == "src" || (a.Key == "href" && !strings.HasPrefix(a.Val, "#")) {
					t.Errorf("<%s %s=%q> loads something from outside the file", tok.Data, a.Key, a.Val)
				}
			}
			if tok.Data == "script" || tok.Data == "link" {
				t.Errorf("<%s> in a self-contained report", tok.Data)
			}
			if !voidElements[tok.Data] {
				stack = append(stack, tok.Data)
			}
		case html.EndTagToken:
			if len(stack) == 0 || stack[len(stack)-1] != tok.Data {
				t.Fatalf("</%s> closes %v", tok.Data, stack)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Errorf("unclosed elements %v", stack)
	}
	if bytes.Contains(page, []byte("url(")) || bytes.Contains(page, []byte("@import")) {
		t.Error("CSS references an external resource")
	}
	re := regexp.MustCompile(`(?s)<svg .*?</svg>`)
	for _, svg := range re.FindAll(page, -1) {
		svgs++
		d := xml.NewDecoder(bytes.NewReader(svg))
		d.Strict = true
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("SVG %d is not well-formed XML: %v\n%s", svgs, err, svg)
			}
		}
	}
	return svgs
}

func TestHTMLValidAndSelfContained(t *testing.T) {
	run, ss := kubeOVNRun()
	page := render(t, FormatHTML, Input{run, ss})
	// 12 table columns get a bar chart each; the six latency groups with a
	// CDF (the builtin arms record one) get a CDF chart each.
	if n := checkHTML(t, page); n != 12+6 {
		t.Errorf("%d SVG charts, want 18", n)
	}
	for _, want := range []string{"6.1.0-27-amd64", "Debian GNU/Linux 12", "AMD EPYC 7B13", "all 5 samples failed", "host: no CDF"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	r1, s1 := ciliumRun(3, ubuntu20, 1)
	r2, s2 := ciliumRun(4, opensuse15, 1.12)
	if n := checkHTML(t, render(t, FormatHTML, Input{r1, s1}, Input{r2, s2})); n != 6 {
		t.Errorf("multi-run page has %d charts, want 6", n)
	}
}

// Names come from users' experiment files: they must not break the page.
func TestHTMLEscapesNames(t *testing.T) {
	run, ss := ciliumRun(3, ubuntu20, 1)
	for i := range ss {
		if ss[i].Arm == "vxlan" {
			ss[i].Arm = `<b>"x&y"</b>`
		}
	}
	run.Arms[1].Name = `<b>"x&y"</b>`
	page := render(t, FormatHTML, Input{run, ss})
	checkHTML(t, page)
	if bytes.Contains(page, []byte(`<b>"x&y"</b>`)) {
		t.Error("arm name not escaped")
	}
}

// A long latency tail switches the CDF to a logarithmic axis.
func TestCDFLogScale(t *testing.T) {
	run, ss := kubeOVNRun()
	for i := range ss {
		if r := ss[i].Result; r != nil && r.Latency != nil && len(r.Latency.CDF) > 0 {
			r.Latency.CDF[5].Ns *= 100 // p99.9 a hundred times slower
		}
	}
	page := render(t, FormatHTML, Input{run, ss})
	checkHTML(t, page)
	if !bytes.Contains(page, []byte("log scale")) {
		t.Error("no log-scale CDF for a long tail")
	}
	run, ss = kubeOVNRun()
	if bytes.Contains(render(t, FormatHTML, Input{run, ss}), []byte("log scale")) {
		t.Error("log scale for a short tail")
	}
}
