package experiment

import (
	"context"
	"errors"

	"github.com/cnibench/cnibench/pkg/result"
)

// DatapathMeter measures a lab's userspace datapath daemon (OVS-DPDK's
// ovs-vswitchd and its PMD threads) over a window; pkg/lab's meter.
type DatapathMeter interface {
	Start(ctx context.Context) error
	// Stop returns the window's figures and, keyed relative to
	// cpu.datapath, why any of them is missing.
	Stop(ctx context.Context) (*result.DatapathCPU, map[string]string)
}

// DatapathLab is implemented by lab instances whose datapath runs in a
// userspace daemon; the runner then reports that daemon's CPU beside the
// engine's (result cpu.datapath). DatapathMeter returns nil when there is
// nothing to meter.
type DatapathLab interface {
	DatapathMeter() DatapathMeter
}

// meteredMeasurer measures the datapath daemon over the same window as the
// engine: from the end of the client's warmup for the measured duration
// (or until the client ends, if sooner).
type meteredMeasurer struct {
	inner Measurer
	m     DatapathMeter
}

func (mm meteredMeasurer) Measure(ctx context.Context, req MeasureRequest) (*result.Result, error) {
	var (
		dp      *result.DatapathCPU
		missing map[string]string
	)
	bg := context.WithoutCancel(ctx)
	res, why, err := measureInWindow(ctx, mm.inner, req, "datapath meter",
		func() error { return mm.m.Start(bg) },
		func() error {
			if dp, missing = mm.m.Stop(bg); dp == nil {
				return errors.New("it gave no figures") // never "" as the reason cpu.datapath is missing
			}
			return nil
		})
	if res == nil {
		return res, err
	}
	if res.Missing == nil {
		res.Missing = map[string]string{}
	}
	if dp == nil {
		res.Missing["cpu.datapath"] = why
		return res, err
	}
	for k, v := range missing {
		res.Missing["cpu.datapath."+k] = v
	}
	if dp.Seconds != nil {
		if res.Transactions != nil && res.Transactions.Count > 0 {
			dp.UsPerTransaction = result.F(*dp.Seconds * 1e6 / float64(res.Transactions.Count))
		} else {
			res.Missing["cpu.datapath.us_per_transaction"] = "no transactions in this test"
		}
		if res.Throughput != nil && res.Throughput.BytesReceived != nil && *res.Throughput.BytesReceived > 0 {
			dp.SecondsPerGB = result.F(*dp.Seconds / (float64(*res.Throughput.BytesReceived) / 1e9))
		} else {
			res.Missing["cpu.datapath.seconds_per_gb"] = "no bytes received in this test"
		}
	}
	if res.CPU == nil {
		res.CPU = &result.CPU{}
	}
	res.CPU.Datapath = dp
	return res, err
}
