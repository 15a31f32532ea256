package experiment

import (
	"context"

	"github.com/cnibench/cnibench/pkg/profile"
	"github.com/cnibench/cnibench/pkg/result"
)

// Profiler samples the CPUs during a window (pkg/profile's Session).
type Profiler interface {
	Start() error
	Stop() (*profile.Profile, error)
}

// measureProfiled runs one measurement with p sampling from the end of the
// client's warmup for the measured duration (or until the client ends, if
// sooner). The profile is nil, with the reason, when the window never
// opened.
func measureProfiled(ctx context.Context, m Measurer, req MeasureRequest, p Profiler) (*result.Result, *profile.Profile, string, error) {
	var prof *profile.Profile
	res, why, err := measureInWindow(ctx, m, req, "profile", p.Start, func() error {
		pr, err := p.Stop()
		if err == nil {
			prof = pr
		}
		return err
	})
	if prof == nil {
		return res, nil, why, err
	}
	return res, prof, "", err
}
