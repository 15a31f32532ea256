package experiment

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/store"
)

func TestConntrackLimitsHasPressure(t *testing.T) {
	e, err := Load("conntrack-limits")
	if err != nil {
		t.Fatal(err)
	}
	if e.Pressure == nil || len(e.Pressure.Rates) == 0 || e.Pressure.Sources == 0 {
		t.Fatalf("pressure block %+v", e.Pressure)
	}
	for _, a := range e.Arms {
		if a.lab == nil {
			t.Errorf("arm %s: no lab spec", a.Name)
		}
	}
}

func TestPressureBlockErrorsNameTheField(t *testing.T) {
	base := "name: x\ntests: [tcp_crr]\narms:\n  - {name: a, topology: native, knobs: {conntrack: \"on\"}}\n"
	for body, want := range map[string]string{
		"pressure:\n  rates: [200, 100]\n":                                 "pressure.rates[1]: 100",
		"pressure:\n  rates: [100]\n  step: x\n":                           `bad duration "x"`,
		"pressure:\n  rates: [100]\n  flow: 1\n":                           `unknown field "flow"`,
		"pressure:\n  flows: [10]\n":                                       "pressure.rates: required",
		"pressure:\n  rates: [100]\n  sources: 0\n  max_inflight: 70000\n": "source ports",
	} {
		_, err := Parse([]byte(base+body), "x.yaml")
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %q, got %v", body, want, err)
		}
	}
}

// What the command refuses, it refuses before building anything (no root
// needed to see these errors).
func TestPressureCommandRefusals(t *testing.T) {
	for c, want := range map[*PressureCommand]string{
		{Ref: "default"}: "has no pressure: block",
		{Ref: "conntrack-limits", Arms: []string{"nope"}}: `no arm "nope"`,
		{Ref: "conntrack-limits", Flows: []int{-5}}:       "pressure.flows[0]: -5",
		{Ref: "conntrack-limits", Repeats: 99}:            "pressure.repeats: 99",
		{Ref: "no-such-experiment"}:                       "no ready experiment",
	} {
		err := c.Run(context.Background(), io.Discard, io.Discard)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: want %q, got %v", *c, want, err)
		}
	}
}

// A --db that cannot hold results is refused, as an input error of one
// line, before any lab is built (root only: the root check comes first).
func TestPrivPressureRefusesBadDB(t *testing.T) {
	testns.NeedRoot(t)
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte("not a database\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, db := range []string{dir, notDB, "postgres://u@h/db?sslmode=bogus"} {
		err := PressureCommand{Ref: "conntrack-limits", DB: db}.Run(context.Background(), io.Discard, io.Discard)
		if err == nil || !errors.Is(err, ErrInvalid) && !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "--db") || strings.Contains(err.Error(), "\n") {
			t.Errorf("--db %s: %v", db, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left in the directory: %v", ents)
	}
}
