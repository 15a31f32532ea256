package engine

import (
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
)

func TestParseSize(t *testing.T) {
	good := map[string]int{"1": 1, "64": 64, "1K": 1024, "4k": 4096, "64K": 65536, " 2M": 2 << 20}
	for in, want := range good {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"1Q", "", "0", "-1", "K", "1.5K", "9999999999", "3G"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
	if l, err := ParseSizes("1,1K,4K"); err != nil || len(l) != 3 || l[2] != 4096 {
		t.Errorf("ParseSizes: %v %v", l, err)
	}
	if _, err := ParseSizes("1,,4K"); err == nil {
		t.Error("empty list element accepted")
	}
}

func TestParseRate(t *testing.T) {
	good := map[string]float64{"100M": 1e8, "2G": 2e9, "0": 0, "1.5g": 1.5e9, "500k": 5e5, "1000": 1000}
	for in, want := range good {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"fast", "-1M", "", "NaN", "1X"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) accepted", in)
		}
	}
}

func TestCheckSize(t *testing.T) {
	if CheckSize(result.UDPBW, 4) == nil || CheckSize(result.UDPBW, 8) != nil {
		t.Error("udp_bw minimum")
	}
	if CheckSize(result.UDPLat, 65508) == nil || CheckSize(result.TCPBW, 65508) != nil {
		t.Error("udp maximum")
	}
	if CheckSize(result.TCPLat, 0) == nil {
		t.Error("zero size")
	}
}
