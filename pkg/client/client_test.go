package client

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	f := Flags{Server: "h", Tests: "tcp_lat,udp_bw", Sizes: "64,1K", Rate: "2G", Port: 7420, Parallel: 2, Duration: time.Second, Engine: "builtin"}
	p, err := f.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tests) != 2 || p.Sizes[1] != 1024 || p.RateBps != 2e9 || p.Server != "h" || p.Port != 7420 {
		t.Errorf("plan %+v", p)
	}
	f.Server = "h:5201"
	if p, err = f.Plan(); err != nil || p.Server != "h" || p.Port != 5201 {
		t.Errorf("--server h:5201: %+v %v", p, err)
	}
}

// Every refused flag is ErrInvalid (a usage error), found before anything
// is measured — an engine that lacks a test included.
func TestPlanRefuses(t *testing.T) {
	ok := Flags{Server: "h", Tests: "tcp_lat", Sizes: "1", Port: 7420, Parallel: 1, Duration: time.Second, Engine: "builtin"}
	for _, c := range []struct {
		edit func(*Flags)
		want string
	}{
		{func(f *Flags) { f.Server = "" }, "--server is required"},
		{func(f *Flags) { f.Tests = "tcp_rr" }, `unknown test "tcp_rr"`},
		{func(f *Flags) { f.Tests, f.Sizes = "udp_bw", "70000" }, "65507"},
		{func(f *Flags) { f.Warmup = -time.Second }, "--warmup"},
		{func(f *Flags) { f.Rate = "fast" }, `bad rate "fast"`},
		{func(f *Flags) { f.Engine = "nosuch" }, `unknown engine "nosuch"`},
		{func(f *Flags) { f.Engine, f.Tests = "iperf3", "tcp_crr" }, "tcp_crr"},
		{func(f *Flags) { f.Engine, f.PathMTU = "iperf3", true }, "--path-mtu"},
	} {
		f := ok
		c.edit(&f)
		_, err := f.Plan()
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: want ErrInvalid with %q, got %v", f, c.want, err)
		}
	}
}
