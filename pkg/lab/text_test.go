package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/pkg/tune"
)

func TestParseSets(t *testing.T) {
	k, err := ParseSets([]string{"mtu = 1400", "conntrack=off", "mtu=1300"})
	if err != nil || k["mtu"] != "1300" || k["conntrack"] != "off" {
		t.Errorf("%v %v", k, err)
	}
	if _, err := ParseSets([]string{"mtu"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "want key=value") {
		t.Errorf("no '=': %v", err)
	}
}

// Scopes that need no lab or namespace resolve, and every bad one is
// ErrInvalid naming what is allowed.
func TestScopeNamespaces(t *testing.T) {
	for _, s := range []string{"", "host"} {
		if nss, err := ScopeNamespaces(s); nss != nil || err != nil {
			t.Errorf("%q: %v %v", s, nss, err)
		}
	}
	for _, c := range [][2]string{
		{"cluster", "use host, lab:<name> or netns:<name>"},
		{"netns:", "no network namespace"},
		{"netns:cnb-no-such-namespace", "no network namespace"},
		{"lab:", "needs a lab name"},
	} {
		if _, err := ScopeNamespaces(c[0]); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c[1]) {
			t.Errorf("%q: got %v, want ErrInvalid with %q", c[0], err, c[1])
		}
	}
}

func TestWriteEndpoints(t *testing.T) {
	l := &Lab{Name: "x", ServiceIP: "10.96.0.10", Endpoints: map[string]Endpoint{
		"client": {Kind: "pod", IP: "10.0.0.1", Netns: "cnb-1-client"},
		"host":   {Kind: "host", IP: "10.0.0.254"},
	}}
	for i := 0; i < 8; i++ {
		l.Endpoints["pod"+string(rune('a'+i))] = Endpoint{Kind: "pod", Netns: "n"}
	}
	var b bytes.Buffer
	l.WriteEndpoints(&b)
	out := b.String()
	for _, want := range []string{"cnb-1-client", "(host)", "(2 more pods: cnibench lab show x --json)", "service VIP 10.96.0.10"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

// An empty journal directory: the text says there is nothing to roll back,
// the JSON lists no journals (an array, not null).
func TestStatusNoJournals(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	_ = Status(&b, dir, false, false) // labs of other tests may be unreadable to a non-root user
	if !strings.Contains(b.String(), "no applied journals in "+dir) {
		t.Errorf("text:\n%s", b.String())
	}
	b.Reset()
	_ = Status(&b, dir, false, true)
	var doc struct {
		Journals []tune.JournalInfo `json:"journals"`
		Labs     []JournalStatus    `json:"labs"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil || doc.Journals == nil || len(doc.Journals) != 0 || doc.Labs == nil {
		t.Errorf("json %v: %s", err, b.String())
	}
}
