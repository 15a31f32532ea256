package probe

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
)

func TestPrivProbe(t *testing.T) {
	testns.NeedRoot(t)
	// Only the probe's own namespaces (cnb-<id>-probe) count: other tests
	// and labs on the host create and remove theirs meanwhile.
	probes := func() []string {
		all, _ := netns.List(runid.Prefix)
		var out []string
		for _, n := range all {
			if strings.HasSuffix(n, "-probe") {
				out = append(out, n)
			}
		}
		return out
	}
	before := probes()
	r, err := Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after := probes(); len(after) != len(before) {
		t.Errorf("probe left namespaces: %v (before %v)", after, before)
	}
	if len(r.Capabilities) != len(IDs()) || r.Kernel == "" {
		t.Fatalf("report: %+v", r)
	}
	byID := map[string]Capability{}
	for _, c := range r.Capabilities {
		if c.ID == "" || c.Title == "" || c.How == "" {
			t.Errorf("capability without id, title or how: %+v", c)
		}
		byID[c.ID] = c
	}
	// Every lab preset cnibench builds on any kernel it supports needs
	// these; nftables and veth-based checks must come out decided.
	for _, id := range []string{"vxlan", "nftables", "big-tcp", "perf-software"} {
		if c := byID[id]; c.Supported == nil || !*c.Supported {
			t.Errorf("%s: %+v", id, c)
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	t.Logf("probed %d capabilities in %v; supported: %v", len(r.Capabilities), r.Took, r.Supported())
}

func TestPrivRequire(t *testing.T) {
	testns.NeedRoot(t)
	if err := Require(context.Background(), "", "vxlan", "btf"); err != nil {
		t.Errorf("vxlan, btf: %v", err)
	}
	if err := Require(context.Background(), "", "nosuch"); err == nil || errors.Is(err, ErrNotSupported) {
		t.Errorf("an unknown capability: %v", err)
	}
}

func TestWriteText(t *testing.T) {
	yes, no := true, false
	r := &Report{Kernel: "6.18", Capabilities: []Capability{{ID: "vxlan", Supported: &yes, How: "link add"},
		{ID: "geneve", Supported: &no, How: "link add", Detail: "EOPNOTSUPP"}, {ID: "ipvs", How: "module"}}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kernel 6.18", "vxlan", "yes", "no", "link add: EOPNOTSUPP", "undecided"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}

// A package's row says what is missing and the command that installs it.
func TestInstalledNamesWhatIsMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	ok, how, detail := installed("apt-get install ovn-central ovn-host", []string{"ovn-northd"}, "/nonexistent/ovn-nb.ovsschema")
	if ok == nil || *ok || !strings.Contains(how, "ovn-northd") ||
		detail != "missing: ovn-northd, /nonexistent/ovn-nb.ovsschema (apt-get install ovn-central ovn-host)" {
		t.Errorf("installed: %v %q %q", ok, how, detail)
	}
	bin := t.TempDir()
	if err := os.WriteFile(bin+"/ovn-northd", []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	if ok, _, detail := installed("x", []string{"ovn-northd"}); ok == nil || !*ok || detail != "" {
		t.Errorf("all there: %v %q", ok, detail)
	}
}
