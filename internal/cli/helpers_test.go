package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cnibench/cnibench/internal/storetest"
	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// runCLI runs cnibench in process and returns its standard output.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), args, &out, &errb)
	return out.String(), err
}

// usageCase is a command line that must be refused with a one-line usage
// error (exit 2) containing want.
type usageCase struct {
	args []string
	want string
}

func wantUsageErrors(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, c := range cases {
		_, err := runCLI(t, c.args...)
		if err == nil || ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: got %v (exit %d), want a one-line usage error containing %q", c.args, err, ExitCode(err), c.want)
		}
	}
}

// storeLatRun stores a run of tcp_lat at 1 B on arms host and vxlan, five
// repeats interleaved; us gives each sample's one-way latency in µs.
func storeLatRun(t *testing.T, db *store.DB, name string, started time.Time, host result.Fingerprint, complete bool, us func(rep int, arm string) float64) {
	t.Helper()
	// Named as cnibench run names runs: <experiment>-<UTC start>.
	exp := strings.TrimSuffix(name, "-"+started.UTC().Format("20060102T150405Z"))
	run := &store.Run{Name: name, ExperimentName: exp, Kind: store.KindLab, Baseline: "host", Started: started, Host: host,
		Arms: []store.Arm{{Name: "host", Topology: "host", Engine: "builtin"}, {Name: "vxlan", Topology: "vxlan", Engine: "builtin"}}}
	id, err := db.CreateRun(run)
	if err != nil {
		t.Fatal(err)
	}
	for rep := 0; rep < 5; rep++ {
		for _, arm := range []string{"host", "vxlan"} {
			r := result.New(result.Tool{Name: "cnibench"}, result.TCPLat, 1)
			r.Latency = &result.Latency{OneWayNs: result.Dist{Count: 1000, Mean: result.F(us(rep, arm) * 1000)}}
			if err := db.AddSample(&store.Sample{RunID: id, Seq: rep*2 + len(arm), Arm: arm, Engine: "builtin", Test: result.TCPLat, MsgSize: 1, Repeat: rep, Result: r}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.FinishRun(id, complete, "ok"); err != nil {
		t.Fatal(err)
	}
}

// privExperiment is the start of a privileged end-to-end test: root, the
// built binary, and the experiment yaml written to a temporary directory.
// tinyExperiment is a small experiment file: tcp_lat at 1 byte, three
// 200 ms repeats, one arm per topology named after it.
func tinyExperiment(name string, topologies ...string) string {
	y := "name: " + name + "\ntests: [tcp_lat]\nduration: 200ms\nwarmup: 0s\nrepeats: 3\narms:\n"
	for _, topo := range topologies {
		y += "  - {name: " + topo + ", topology: " + topo + "}\n"
	}
	return y
}

func privExperiment(t *testing.T, yaml string) (bin, dir, exp string) {
	t.Helper()
	testns.NeedRoot(t)
	bin, dir = testns.Binary(t), t.TempDir()
	exp = filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(exp, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return bin, dir, exp
}

// wantRunRefused runs `cnibench run` of the built binary with args and
// --db db: it must exit 2 with one line containing want, and leave no
// database behind.
func wantRunRefused(t *testing.T, bin, db, want string, args ...string) {
	t.Helper()
	out, code := runBin(t, bin, append(append([]string{"run"}, args...), "--db", db)...)
	if code != 2 || !strings.Contains(out, want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Errorf("run %v: exit %d, want 2 and one line containing %q:\n%s", args, code, want, out)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("run %v: a refused run created the database %s", args, db)
	}
}

// seedDB stores two small runs of one experiment: vxlan is slower than
// host in run 1 and the same in run 2.
func seedDB(t *testing.T) string {
	return storetest.New(t, func(db *store.DB) {
		for i, name := range []string{"first", "second"} {
			storeLatRun(t, db, name, time.Date(2026, 11, 22, 5, i, 0, 0, time.UTC),
				result.Fingerprint{Hostname: "h", Kernel: "6.1.0", Governor: "performance"}, true,
				func(rep int, arm string) float64 {
					if arm == "vxlan" && i == 0 {
						return 13 + 0.1*float64(rep)
					}
					return 10 + 0.1*float64(rep)
				})
		}
	})
}

// historyDB stores 12 runs of experiment "nightly" (vxlan 20% slower from
// the 7th on, with a kernel change) plus an incomplete one and a run of
// another experiment.
func historyDB(t *testing.T) string {
	return storetest.New(t, func(db *store.DB) {
		add := func(name string, started time.Time, kernel string, vxlanUs float64, complete bool) {
			storeLatRun(t, db, name, started, result.Fingerprint{Hostname: "ci", Kernel: kernel}, complete,
				func(rep int, arm string) float64 {
					us := 10 + 0.1*float64(rep) + 0.05*float64(started.Day()%3)
					if arm == "vxlan" {
						us += vxlanUs
					}
					return us
				})
		}
		t0 := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
		for i := 0; i < 12; i++ {
			s := t0.AddDate(0, 0, i)
			kernel, vx := "6.1.0", 3.0
			if i >= 6 {
				kernel, vx = "6.18.4", 5.0
			}
			add("nightly-"+s.Format("20060102T150405Z"), s, kernel, vx, true)
		}
		add("nightly-"+t0.AddDate(0, 0, 20).Format("20060102T150405Z"), t0.AddDate(0, 0, 20), "6.18.4", 9, false)
		add("default-"+t0.Format("20060102T150405Z"), t0, "6.1.0", 3, true)
	})
}

// lockedBuffer is a bytes.Buffer a running command writes while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitOutput waits until out, which cmd writes, holds want; after within it
// kills cmd and fails t with what cmd wrote.
func waitOutput(t *testing.T, cmd *exec.Cmd, out *lockedBuffer, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("no %q within %v:\n%s", want, within, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
