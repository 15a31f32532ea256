package report

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/pgtest"
	"github.com/cnibench/cnibench/internal/storetest"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// fill100Runs stores 100 runs shaped like experiments/default.yaml: five
// arms, the four qperf-style tests at 1 B, five repeats (100 samples each).
func fill100Runs(b *testing.B) string {
	b.Helper()
	return storetest.New(b, func(db *store.DB) { fillRuns(b, db, 100, 5) })
}

// fillRuns stores n runs of experiment "default" shaped like it, with reps
// repeats (20·reps samples each).
func fillRuns(b *testing.B, db *store.DB, n, reps int) {
	b.Helper()
	{
		arms := []string{"host", "veth", "bridge", "native", "vxlan"}
		for i := 0; i < n; i++ {
			run := &store.Run{Name: fmt.Sprintf("bench-%04d", i), ExperimentName: "default", Kind: store.KindLab, Baseline: "host", Complete: true,
				Status: "ok", Started: t0.Add(time.Duration(i) * time.Hour), Host: ubuntu20}
			for _, a := range arms {
				run.Arms = append(run.Arms, store.Arm{Name: a, Topology: a, Engine: "builtin"})
			}
			id, err := db.CreateRun(run)
			if err != nil {
				b.Fatal(err)
			}
			seq := 0
			for rep := 0; rep < reps; rep++ {
				for _, test := range []string{result.TCPLat, result.UDPLat, result.TCPBW, result.UDPBW} {
					for k, a := range arms {
						f := (1 + 0.1*float64(k)) * (1 + jitter[(rep+i)%5])
						var r *result.Result
						if test == result.TCPBW || test == result.UDPBW {
							r = bwResult(test, 1, 20/f, 30, 60, "")
						} else {
							r = latResult(test, 1, 12*f, 0.3, "cnibench")
						}
						if err := db.AddSample(&store.Sample{RunID: id, Seq: seq, Arm: a, Engine: "builtin", Test: test, MsgSize: 1, Repeat: rep, Result: r}); err != nil {
							b.Fatal(err)
						}
						seq++
					}
				}
			}
			if err := db.FinishRun(id, true, "ok"); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func load100(b *testing.B, path string) []Input {
	db, err := store.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	runs, err := db.Runs()
	if err != nil || len(runs) != 100 {
		b.Fatalf("%d runs, %v", len(runs), err)
	}
	var in []Input
	for i := range runs {
		ss, err := db.Samples(runs[i].ID)
		if err != nil {
			b.Fatal(err)
		}
		in = append(in, Input{&runs[i], ss})
	}
	return in
}

// BenchmarkRender100Runs loads 100 stored runs from SQLite and renders a
// report of each in every format. Target (issue 4): ≤ 2 s per iteration.
func BenchmarkRender100Runs(b *testing.B) {
	path := fill100Runs(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, x := range load100(b, path) {
			for _, f := range Formats {
				if err := Render(io.Discard, f, x.Run, x.Samples); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// BenchmarkRenderSideBySide100Runs loads 100 stored runs and renders them
// as one side-by-side HTML report (the per-host table of the Cilium document).
func BenchmarkRenderSideBySide100Runs(b *testing.B) {
	path := fill100Runs(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := RenderRuns(io.Discard, FormatHTML, load100(b, path)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHistory1000Runs reads 1,000 stored runs of one experiment (60
// samples each: five arms, four tests, three repeats) and renders their
// history as HTML, from a SQLite file and from a PostgreSQL database (a
// throwaway cluster, pkg/store's tests' own). Target (issue 27): ≤ 2 s per
// iteration on each.
func BenchmarkHistory1000Runs(b *testing.B) {
	pg, err := pgtest.StartPostgres()
	if err != nil {
		b.Logf("PostgreSQL case skipped: %v", err)
	} else {
		defer pg.Stop()
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			loc := filepath.Join(b.TempDir(), "h.db")
			if kind == "postgres" {
				if pg == nil {
					b.Skip("no PostgreSQL")
				}
				loc = pg.NewDB(b)
			}
			db, err := store.Open(loc)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			start := time.Now()
			fillRuns(b, db, 1000, 3)
			b.Logf("%s: stored 1,000 runs × 60 samples in %v", kind, time.Since(start).Round(time.Second))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h, _, err := LoadHistory(db, "default", 0)
				if err != nil || len(h.Runs) != 1000 {
					b.Fatalf("history of %d runs: %v", len(h.Runs), err)
				}
				if err := WriteHistory(io.Discard, FormatHTML, h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
