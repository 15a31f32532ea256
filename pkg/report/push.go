package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/errkind"
)

// Pushing a report's cells to a Prometheus Pushgateway (`report --push
// URL`), one group per run: job "cnibench", grouped by experiment and run
// name, so pushing a run again replaces its own group and nothing else.
// The body is the OpenMetrics text (openmetrics.go), which the Pushgateway
// reads as the Prometheus text format: gauges only, and "# EOF" is a
// comment there.

// ErrPush is wrapped when the Pushgateway cannot be reached or refuses.
var ErrPush = errors.New("push")

// pushTimeout bounds each push.
const pushTimeout = 30 * time.Second

// PushRuns pushes every run of models to the Pushgateway at base (e.g.
// http://pushgateway:9091) and returns the group URLs it replaced.
func PushRuns(ctx context.Context, base string, models []*Model) ([]string, error) {
	if _, err := checkPushURL(base); err != nil {
		return nil, err
	}
	var groups []string
	for _, m := range models {
		var body bytes.Buffer
		if err := writeOpenMetrics(&body, []*Model{m}); err != nil {
			return groups, err
		}
		exp := m.Run.ExperimentName
		if exp == "" {
			exp = m.Run.Kind // a k8s run has no experiment file
		}
		group := strings.TrimSuffix(base, "/") + "/metrics/job/cnibench/experiment/" + url.PathEscape(exp) + "/run/" + url.PathEscape(m.Run.Name)
		if err := put(ctx, group, body.Bytes()); err != nil {
			return groups, err
		}
		groups = append(groups, group)
	}
	return groups, nil
}

// checkPushURL refuses what cannot be a Pushgateway's URL, before anything
// is read or rendered.
func checkPushURL(base string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errkind.Errorf(ErrInvalid, "--push %q: want the Pushgateway's http:// or https:// URL", base)
	}
	return u, nil
}

func put(ctx context.Context, group string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, group, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPush, err)
	}
	req.Header.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("push to %s: %w: %v", group, ErrPush, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("push to %s: %w: HTTP %d: %s", group, ErrPush, resp.StatusCode, strings.TrimSpace(strings.ReplaceAll(string(msg), "\n", " ")))
	}
	return nil
}
