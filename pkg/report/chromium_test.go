package report

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	headlesspkg "github.com/cnibench/cnibench/internal/headless"
)

// headless opens page in Debian's Chromium the way a person's browser would
// render it (internal/headless), and returns the DOM after rendering and
// every console message. CNIBENCH_SCREENSHOT=FILE.png also saves what it drew.
func headless(t *testing.T, page []byte) (dom string, console []string) {
	t.Helper()
	return headlesspkg.Render(t, page, os.Getenv("CNIBENCH_SCREENSHOT"))
}

var (
	svgRE   = regexp.MustCompile(`(?s)<svg[^>]*>(.*?)</svg>`)
	shapeRE = regexp.MustCompile(`<(rect|path|line|polyline|circle)\b`)
)

// The HTML report as a person sees it: Chromium renders every chart with
// drawn shapes and the page logs nothing to its console.
func TestHTMLInChromium(t *testing.T) {
	// The check itself must be able to fail: a page with a script error
	// shows up in the console capture.
	if _, console := headless(t, []byte(`<!doctype html><html><body><script>undefined_fn()</script></body></html>`)); len(console) == 0 {
		t.Fatal("a page with a script error logged nothing: the console capture does not work")
	}
	run, ss := kubeOVNRun()
	dom, console := headless(t, render(t, FormatHTML, Input{run, ss}))
	if len(console) > 0 {
		t.Errorf("the report logged to the console:\n%s", strings.Join(console, "\n"))
	}
	charts := svgRE.FindAllStringSubmatch(dom, -1)
	if len(charts) != 12+6 {
		t.Errorf("Chromium's DOM has %d charts, want 18", len(charts))
	}
	for i, c := range charts {
		if !shapeRE.MatchString(c[1]) {
			t.Errorf("chart %d draws nothing: %.200s", i, c[1])
		}
	}
	if !strings.Contains(dom, "Debian GNU/Linux 12") {
		t.Error("the rendered page lacks the host table")
	}
}

// The page leads with the answer: rendered 1280 px wide, as a laptop's
// browser shows it, the answer and the results table start within the
// first screen (900 px). A copy of the page gets a script that writes
// where Chromium laid them out into the DOM it dumps; the report itself
// stays script-free.
func TestHTMLAnswerOnTheFirstScreen(t *testing.T) {
	run, ss := ciliumRun(3, ubuntu20, 1)
	page := string(render(t, FormatHTML, Input{run, ss}))
	probe := `<script>for (const id of ["answer", "results"]) {
  const e = document.getElementById(id);
  document.body.setAttribute("data-top-" + id, e ? Math.round(e.getBoundingClientRect().top) : -1);
}</script>`
	dom, console := headless(t, []byte(strings.Replace(page, "</body>", probe+"</body>", 1)))
	if len(console) > 0 {
		t.Errorf("console:\n%s", strings.Join(console, "\n"))
	}
	for _, id := range []string{"answer", "results"} {
		m := regexp.MustCompile(`data-top-` + id + `="(-?\d+)"`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("no position for #%s in the DOM", id)
		}
		top, _ := strconv.Atoi(m[1])
		if top < 0 || top > 900 {
			t.Errorf("#%s starts at %d px: below the first screen (900 px)", id, top)
		}
	}
}
