package experiment

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/driver"
	"github.com/cnibench/cnibench/pkg/profile"

	// The engines an experiment may name register themselves here, so that
	// Check and Measure find every one of them.
	_ "github.com/cnibench/cnibench/pkg/driver/builtin"
	_ "github.com/cnibench/cnibench/pkg/driver/iperf3"
	_ "github.com/cnibench/cnibench/pkg/driver/qperf"
	_ "github.com/cnibench/cnibench/pkg/driver/sockperf"
	"github.com/cnibench/cnibench/pkg/lab"
	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/store"
)

// Labs builds arms' topologies with pkg/lab.
type Labs struct{ Log io.Writer }

// Up builds an arm's lab from the spec Check resolved.
func (p Labs) Up(ctx context.Context, spec *lab.Spec) (LabInstance, error) {
	log := p.Log
	if log == nil {
		log = io.Discard
	}
	l, err := lab.Up(ctx, spec, lab.UpOptions{Log: log})
	if err != nil {
		return nil, err
	}
	return labInstance{l}, nil
}

type labInstance struct{ l *lab.Lab }

func (i labInstance) Name() string { return i.l.Name }

func (i labInstance) Endpoint(name string) (string, string, error) {
	ep, err := i.l.Endpoint(name)
	if err != nil {
		return "", "", err
	}
	return ep.Netns, ep.IP, nil
}

func (i labInstance) Down(ctx context.Context) error { return i.l.Down(ctx) }

func (i labInstance) ChangesHost() bool { return i.l.ChangesHost() }

// DatapathMeter meters OVS-DPDK's ovs-vswitchd (nil for kernel datapaths).
func (i labInstance) DatapathMeter() DatapathMeter {
	if m := i.l.DatapathMeter(); m != nil {
		return m
	}
	return nil
}

// ProbePath probes the path between two of the lab's endpoints.
func (i labInstance) ProbePath(ctx context.Context, client, server string) (*result.PathMTU, error) {
	return i.l.ProbePath(ctx, client, server)
}

// Health names a daemon of the lab's datapath that exited or stopped (the
// OVN labs'); nil for labs that have none.
func (i labInstance) Health() error { return i.l.Health() }

// Drivers measures with the registered drivers (pkg/driver).
type Drivers struct{}

// Measure runs one measurement with the request's engine.
func (Drivers) Measure(ctx context.Context, req MeasureRequest) (*result.Result, error) {
	d, err := driver.Lookup(req.Engine)
	if err != nil {
		return nil, err
	}
	if !req.StartServer {
		return driver.MeasureClient(ctx, d, req.Spec, req.ClientNetns)
	}
	return driver.Measure(ctx, d, req.Spec, req.ServerNetns, req.ClientNetns)
}

// StoreSink turns the experiment's run and steps into store records and
// hands them to a store.Sink (a store.Recorder on DB unless Store is set):
// the one path every runner's samples take into the results database.
type StoreSink struct {
	DB    *store.DB
	Store store.Sink // nil: store.Recorder{DB: DB}
	Kind  string     // "lab" unless set
	Host  result.Fingerprint
}

func (s StoreSink) sink() store.Sink {
	if s.Store != nil {
		return s.Store
	}
	return store.Recorder{DB: s.DB}
}

// Begin creates the run row with the experiment text and its arms.
func (s StoreSink) Begin(e *Experiment) (int64, error) {
	kind := s.Kind
	if kind == "" {
		kind = "lab"
	}
	started := time.Now().UTC()
	run := &store.Run{
		// Run names are unique in the store; the experiment's name plus the
		// start time lets the same experiment run again and again.
		Name:           e.Name + "-" + started.Format("20060102T150405Z"),
		ExperimentName: e.Name,
		Kind:           kind,
		Experiment:     e.Text,
		Baseline:       e.Baseline,
		Started:        started,
		Host:           s.Host,
		Labels:         map[string]string{"order": e.Order, "duration": time.Duration(e.Duration).String(), "repeats": fmt.Sprint(e.Repeats)},
	}
	if e.Precision > 0 {
		run.Labels["precision"] = fmt.Sprintf("%g%%", float64(e.Precision)*100)
		run.Labels["budget"] = time.Duration(e.Budget).String()
	}
	for _, a := range e.Arms {
		topo := a.Topology
		if a.ServerAddress != "" {
			topo = "server " + a.ServerAddress
		} else if a.Client != "client" || a.Server != "server" {
			topo = fmt.Sprintf("%s (%s → %s)", a.Topology, a.Client, a.Server)
		}
		run.Arms = append(run.Arms, store.Arm{Name: a.Name, Description: a.Description, Topology: topo, Engine: a.Engine, Knobs: a.Knobs})
	}
	return s.sink().Begin(run)
}

// Sample stores one step, with its profile when it was profiled.
func (s StoreSink) Sample(runID int64, x Sample) error {
	ss := &store.Sample{
		RunID: runID, Seq: x.Step.Seq, Arm: x.Arm.Name, Engine: x.Arm.Engine, Test: x.Step.Test,
		MsgSize: x.Step.MsgSize, Repeat: x.Step.Repeat, Result: x.Result, Error: x.Error,
	}
	if x.Profile == nil && x.ProfileMissing == "" {
		return s.sink().Add(ss, nil) // not profiled
	}
	sp := &store.Profile{Missing: x.ProfileMissing}
	if p := x.Profile; p != nil {
		var b strings.Builder
		if err := profile.WriteFolded(&b, p.Stacks); err != nil {
			return err
		}
		sp.Event, sp.Frequency, sp.CPUs, sp.WindowNs = string(p.Event), p.Frequency, p.CPUs, p.WindowNs
		sp.Samples, sp.Lost, sp.PeriodSum, sp.Folded = p.Samples, p.Lost, p.PeriodSum, b.String()
	}
	return s.sink().Add(ss, sp)
}

// End marks the run complete or not.
func (s StoreSink) End(runID int64, complete bool, status string) error {
	return s.sink().End(runID, complete, status)
}
