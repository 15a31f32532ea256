package report

import (
	"fmt"
	"io"
	"testing"

	"github.com/cnibench/cnibench/internal/storetest"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// fill100Runs stores 100 runs shaped like experiments/default.yaml: five
// arms, the four qperf-style tests at 1 B, five repeats (100 samples each).
func fill100Runs(b *testing.B) string {
	b.Helper()
	return storetest.New(b, func(db *store.DB) {
		arms := []string{"host", "veth", "bridge", "native", "vxlan"}
		for i := 0; i < 100; i++ {
			run := &store.Run{Name: fmt.Sprintf("bench-%03d", i), Kind: store.KindLab, Baseline: "host", Complete: true,
				Status: "ok", Started: t0, Host: ubuntu20}
			for _, a := range arms {
				run.Arms = append(run.Arms, store.Arm{Name: a, Topology: a, Engine: "builtin"})
			}
			id, err := db.CreateRun(run)
			if err != nil {
				b.Fatal(err)
			}
			seq := 0
			for rep := 0; rep < 5; rep++ {
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
	})
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
