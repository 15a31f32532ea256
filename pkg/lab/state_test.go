package lab

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// previousStates copies the state files the previous version wrote
// (testdata/state-157b073) into a private state directory and returns
// their lab names.
func previousStates(t *testing.T) []string {
	t.Helper()
	privateState(t)
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "state-157b073", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(StateDir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	return names
}

// TestStateOfPreviousVersion: labs the previous version left up load, with
// their knobs in the typed spec (notrack's text as it was given decoded
// into networks, not parsed again as a knob), and are exactly what this
// version plans for the same preset, knobs, name and id — so this
// version's Down removes what the old one made, and nothing else.
func TestStateOfPreviousVersion(t *testing.T) {
	for _, name := range previousStates(t) {
		old, err := Get(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s, err := Resolve(old.Preset, "", old.Knobs)
		if err != nil {
			t.Fatalf("%s: its knobs %v no longer resolve: %v", name, old.Knobs, err)
		}
		now := plan(s, old.ID, old.Name)
		base := func(dirs []string) (out []string) {
			for _, d := range dirs {
				out = append(out, filepath.Base(d)) // the old state root is gone
			}
			return out
		}
		for _, c := range []struct {
			what      string
			old, want any
		}{
			{"namespaces", old.Namespaces, now.Namespaces}, {"endpoints", old.Endpoints, now.Endpoints},
			{"host links", old.HostLinks, now.HostLinks}, {"ovs bridges", old.OVSBridges, now.OVSBridges},
			{"private ovs", base(old.PrivateOVS), base(now.PrivateOVS)}, {"pod mtu", old.PodMTU, now.PodMTU},
			{"pods", old.Pods, now.Pods}, {"service ip", old.ServiceIP, now.ServiceIP}, {"knobs", old.Knobs, now.Knobs},
		} {
			if !reflect.DeepEqual(c.old, c.want) {
				t.Errorf("%s: %s %v in the old state, %v planned now", name, c.what, c.old, c.want)
			}
		}
		oldSpec, _ := json.Marshal(old.Spec)
		nowSpec, _ := json.Marshal(s)
		if string(oldSpec) != string(nowSpec) {
			t.Errorf("%s: spec\n%s loaded,\n%s resolved now", name, oldSpec, nowSpec)
		}
		if old.ChangesHost() != (name == "old-dpdk") {
			t.Errorf("%s: ChangesHost %v", name, old.ChangesHost())
		}
	}
	vx, _ := Get("old-vxlan")
	if got := vx.Spec.Notrack.String(); got != "10.244.0.0/16,10.96.0.0/12" || vx.Spec.Fastpath != FastpathEBPF {
		t.Errorf("old-vxlan: notrack %s, fastpath %q", got, vx.Spec.Fastpath)
	}
}

// TestCleanDisruptJournals: a killed `disrupt run`'s journal goes with its
// run id's namespaces; a run id still present, another id and files that
// are not journals stay.
func TestCleanDisruptJournals(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"cnb-ab12.jsonl", "cnb-cd34.jsonl", "cnb-ef56.jsonl", "notes.txt", "cnb-ab12.json"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(id string) bool { return id == "ab12" || id == "ef56" }
	removed := cleanDisruptJournals(dir, gone)
	if want := []string{"disrupt journal cnb-ab12.jsonl", "disrupt journal cnb-ef56.jsonl"}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if want := []string{"cnb-ab12.json", "cnb-cd34.jsonl", "notes.txt"}; !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
	if got := cleanDisruptJournals(filepath.Join(dir, "absent"), gone); got != nil {
		t.Errorf("a missing directory removed %q", got)
	}
}
