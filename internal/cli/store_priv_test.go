package cli

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"sync"
	"testing"

	"github.com/cnibench/cnibench/internal/pgtest"
)

// Four `cnibench run`s at once into one PostgreSQL database (and, for
// comparison, one SQLite file): every sample is stored once, under its own
// run, and `history` sees all four runs.
func TestPrivConcurrentRunsOneDatabase(t *testing.T) {
	bin, dir, exp := privExperiment(t, tinyExperiment("fleet", "veth"))
	pg, err := pgtest.StartPostgres()
	if err != nil {
		t.Skipf("no PostgreSQL: %v", err)
	}
	t.Cleanup(pg.Stop)
	for _, db := range []string{pg.NewDB(t), dir + "/fleet.db"} {
		t.Run(map[bool]string{true: "postgres", false: "sqlite"}[db[0] != '/'], func(t *testing.T) {
			const runs = 4
			var wg sync.WaitGroup
			outs := make([]string, runs)
			errs := make([]error, runs)
			for i := 0; i < runs; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					b, err := exec.Command(bin, "run", exp, "--db", db, "--format", "none", "--wakeup", "none").CombinedOutput()
					outs[i], errs[i] = string(b), err
				}(i)
			}
			wg.Wait()
			for i := range errs {
				if errs[i] != nil {
					t.Fatalf("run %d: %v\n%s", i, errs[i], outs[i])
				}
			}
			out, err := exec.Command(bin, "history", "fleet", "--db", db, "--format", "json").CombinedOutput()
			if err != nil {
				t.Fatalf("history: %v\n%s", err, out)
			}
			var h struct {
				Runs []struct {
					ID int64 `json:"id"`
				} `json:"runs"`
			}
			if err := json.Unmarshal(out, &h); err != nil || len(h.Runs) != runs {
				t.Fatalf("history saw %d runs (%v):\n%s", len(h.Runs), err, out)
			}
			for _, r := range h.Runs {
				out, err := exec.Command(bin, "report", fmt.Sprint(r.ID), "--db", db, "--format", "json").CombinedOutput()
				if err != nil {
					t.Fatalf("report %d: %v\n%s", r.ID, err, out)
				}
				var doc struct {
					Runs []struct {
						Cells []struct {
							Metric string `json:"metric"`
							N      int    `json:"n"`
						} `json:"cells"`
					} `json:"runs"`
				}
				if err := json.Unmarshal(out, &doc); err != nil || len(doc.Runs) != 1 || len(doc.Runs[0].Cells) == 0 {
					t.Fatalf("run %d: %+v (%v)", r.ID, doc.Runs, err)
				}
				for _, c := range doc.Runs[0].Cells {
					if c.N != 3 {
						t.Errorf("run %d: %s has %d samples, want 3", r.ID, c.Metric, c.N)
					}
				}
			}
		})
	}
}
