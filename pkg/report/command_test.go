package report

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cnibench/cnibench/internal/storetest"
	"github.com/cnibench/cnibench/pkg/store"
)

// kubeOVNDB stores the kubeOVNRun fixture in a new results database.
func kubeOVNDB(t *testing.T) string {
	return storetest.New(t, func(db *store.DB) {
		run, samples := kubeOVNRun()
		id, err := db.CreateRun(run)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range samples {
			s.RunID = id
			if err := db.AddSample(&s); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.FinishRun(id, true, "ok"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCommandsRefuseBadOptions(t *testing.T) {
	db := kubeOVNDB(t)
	var out, log bytes.Buffer
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"report format", ReportCommand{DBPath: db, Refs: []string{"last"}, Format: "pdf"}.Run(&out, io.Discard), ErrInvalid},
		{"report baseline", ReportCommand{DBPath: db, Refs: []string{"last"}, Format: FormatTable, Baseline: "nope"}.Run(&out, io.Discard), ErrInvalid},
		{"report unknown run", ReportCommand{DBPath: db, Refs: []string{"nope"}, Format: FormatTable}.Run(&out, io.Discard), store.ErrNotFound},
		{"report no database", ReportCommand{DBPath: db + ".missing", Refs: []string{"last"}, Format: FormatTable}.Run(&out, io.Discard), store.ErrNoDatabase},
		{"compare format", CompareCommand{DBPath: db, A: "last", B: "last", Format: "pdf"}.Run(&out, &log), ErrInvalid},
		{"compare junit without gate", CompareCommand{DBPath: db, A: "last", B: "last", Format: FormatTable, JUnit: "x.xml"}.Run(&out, &log), ErrInvalid},
		{"compare bad gate", CompareCommand{DBPath: db, A: "last", B: "last", Format: FormatTable, FailOn: "worse"}.Run(&out, &log), ErrInvalid},
		// The gate's flags are checked before the runs are: no database needed.
		{"compare bad gate first", CompareCommand{DBPath: db + ".missing", A: "nope", B: "nope", Format: FormatTable, FailOn: "worse"}.Run(&out, &log), ErrInvalid},
		{"report margin", ReportCommand{DBPath: db, Refs: []string{"last"}, Format: FormatTable, Margin: "0%"}.Run(&out, io.Discard), ErrInvalid},
		{"compare margin", CompareCommand{DBPath: db, A: "last", B: "last", Format: FormatTable, Margin: "five"}.Run(&out, &log), ErrInvalid},
		{"compare no arm", CompareCommand{DBPath: db, A: "last@host", B: "last@nope", Format: FormatTable}.Run(&out, &log), store.ErrNoSuchArm},
		{"history format", HistoryCommand{DBPath: db, Experiment: "x", Format: "csv"}.Run(&out, &log), ErrInvalid},
		{"history last", HistoryCommand{DBPath: db, Experiment: "x", Format: FormatTable, Last: -1}.Run(&out, &log), ErrInvalid},
		{"history none", HistoryCommand{DBPath: db, Experiment: "x", Format: FormatTable}.Run(&out, &log), ErrNoHistory},
	} {
		if !errors.Is(tc.err, tc.want) || strings.Contains(tc.err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line matching %v", tc.name, tc.err, tc.want)
		}
	}
	if out.Len() > 0 {
		t.Errorf("refused commands printed %q", out.String())
	}
}

func TestReportAndCompareCommands(t *testing.T) {
	db := kubeOVNDB(t)
	var out bytes.Buffer
	if err := (ReportCommand{DBPath: db, Refs: []string{"last"}, Format: FormatMarkdown, Baseline: "underlay"}).Run(&out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "overlay") || !strings.Contains(out.String(), "underlay") {
		t.Errorf("report:\n%s", out.String())
	}
	// Two arms of one interleaved run, gated: B (overlay) is no more than
	// 50% slower than A (host) anywhere, so the gate passes and says so.
	out.Reset()
	var log bytes.Buffer
	c := CompareCommand{DBPath: db, A: "last@host", B: "last@overlay", Format: FormatTable, FailOn: "slower>50%"}
	if err := c.Run(&out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if out.Len() == 0 || log.Len() == 0 {
		t.Errorf("compare printed %q, logged %q", out.String(), log.String())
	}
}
