// Package headless renders a page in Debian's Chromium the way a person's
// browser would, for tests that check what a report looks like: the DOM
// after rendering, every console message, and a screenshot on request.
package headless

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Render opens page (a whole HTML document) in headless Chromium and
// returns the DOM it rendered and the console messages it logged. When
// screenshot is not "", Chromium also saves what it drew there (PNG). It
// skips t when Chromium is not installed.
func Render(t testing.TB, page []byte, screenshot string) (dom string, console []string) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (scripts/install-deps.sh installs it)")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "page.html")
	if err := os.WriteFile(file, page, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=1280,4000"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(args, "--dump-dom", "file://"+file)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, errb.String())
	}
	for _, line := range strings.Split(errb.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") {
			console = append(console, line)
		}
	}
	if screenshot != "" {
		c := exec.CommandContext(ctx, bin, append(args, "--screenshot="+screenshot, "file://"+file)...)
		if b, err := c.CombinedOutput(); err != nil {
			t.Errorf("screenshot: %v\n%s", err, b)
		}
	}
	return out.String(), console
}
