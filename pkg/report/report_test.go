package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file (go test ./pkg/report -update, then review the diff):\n%s", name, firstDiff(string(want), string(got)))
	}
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + strconv.Itoa(i+1) + ":\n want: " + w + "\n  got: " + g
		}
	}
	return ""
}

func render(t *testing.T, format string, in ...Input) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := RenderRuns(&b, format, in); err != nil {
		t.Fatalf("render %s: %v", format, err)
	}
	return b.Bytes()
}

var exts = map[string]string{FormatTable: "txt", FormatMarkdown: "md", FormatJSON: "json", FormatCSV: "csv", FormatHTML: "html", FormatOpenMetrics: "prom"}

func TestGoldenKubeOVN(t *testing.T) {
	run, ss := kubeOVNRun()
	for _, f := range Formats {
		golden(t, "kube-ovn."+exts[f], render(t, f, Input{run, ss}))
	}
}

func TestGoldenCilium(t *testing.T) {
	run, ss := ciliumRun(3, ubuntu20, 1)
	for _, f := range Formats {
		golden(t, "cilium."+exts[f], render(t, f, Input{run, ss}))
	}
}

func TestGoldenMultiRun(t *testing.T) {
	r1, s1 := ciliumRun(3, ubuntu20, 1)
	r2, s2 := ciliumRun(4, opensuse15, 1.12)
	for _, f := range Formats {
		golden(t, "multi."+exts[f], render(t, f, Input{r1, s1}, Input{r2, s2}))
	}
}

func TestGoldenCompare(t *testing.T) {
	r1, s1 := ciliumRun(3, ubuntu20, 1)
	r2, s2 := ciliumRun(4, opensuse15, 1.12)
	var b bytes.Buffer
	if err := Compare(&b, r1, s1, r2, s2); err != nil {
		t.Fatal(err)
	}
	golden(t, "compare.txt", b.Bytes())
	for _, f := range []string{FormatMarkdown, FormatJSON} {
		b.Reset()
		if err := CompareFormat(&b, f, r1, s1, r2, s2); err != nil {
			t.Fatal(err)
		}
		golden(t, "compare."+exts[f], b.Bytes())
	}
	if err := CompareFormat(&b, FormatHTML, r1, s1, r2, s2); err == nil {
		t.Error("compare accepted html")
	}
}
