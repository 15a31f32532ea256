package store

import (
	"errors"

	"github.com/cnibench/cnibench/pkg/result"
	"github.com/cnibench/cnibench/pkg/runid"
)

// Sink receives a run as it is measured, so an interrupted run keeps what
// it finished: the run first, then each sample (with its CPU profile when
// it was profiled), then whether it completed. Every runner stores through
// one: the experiment runner (experiment.StoreSink adapts its steps) and
// the Kubernetes runner (k8s.Record).
type Sink interface {
	Begin(r *Run) (int64, error)
	Add(s *Sample, p *Profile) error
	// Update replaces the run's host fingerprint and labels: what a run
	// learns about its target after it began (a Kubernetes run probes its
	// nodes once its namespace exists).
	Update(runID int64, host result.Fingerprint, labels map[string]string) error
	End(runID int64, complete bool, status string) error
}

// Recorder is the Sink that writes into a results database.
type Recorder struct{ DB *DB }

// Begin creates the run row. Run names are unique; a run whose name is
// taken (the same experiment started twice in one second) gets a run id
// appended.
func (r Recorder) Begin(run *Run) (int64, error) {
	id, err := r.DB.CreateRun(run)
	if errors.Is(err, ErrRunExists) {
		run.Name += "-" + runid.New()
		id, err = r.DB.CreateRun(run)
	}
	return id, err
}

// Add stores a sample and, when p is not nil, its profile (a profile with
// only Missing set records why a profiled step has none).
func (r Recorder) Add(s *Sample, p *Profile) error {
	if err := r.DB.AddSample(s); err != nil {
		return err
	}
	if p == nil {
		return nil
	}
	p.RunID, p.Seq = s.RunID, s.Seq
	return r.DB.AddProfile(p)
}

// Update replaces the run's host fingerprint and labels.
func (r Recorder) Update(runID int64, host result.Fingerprint, labels map[string]string) error {
	return r.DB.UpdateRunHost(runID, host, labels)
}

// End marks the run finished, complete or not.
func (r Recorder) End(runID int64, complete bool, status string) error {
	return r.DB.FinishRun(runID, complete, status)
}
