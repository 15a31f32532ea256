package engine

import (
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
)

func TestCheckSize(t *testing.T) {
	if CheckSize(result.UDPBW, 1) != nil || CheckSize(result.UDPBW, 0) == nil {
		t.Error("udp_bw takes 1-byte datagrams (counted without sequence numbers), not 0")
	}
	if CheckSize(result.UDPLat, 65508) == nil || CheckSize(result.TCPBW, 65508) != nil {
		t.Error("udp maximum")
	}
	if CheckSize(result.TCPLat, 0) == nil {
		t.Error("zero size")
	}
}

func TestParseSizes(t *testing.T) {
	if l, err := ParseSizes("1,1K,4K"); err != nil || len(l) != 3 || l[0] != 1 || l[2] != 4096 {
		t.Errorf("ParseSizes: %v %v", l, err)
	}
	for _, bad := range []string{"1,,4K", "1Q", ""} {
		if _, err := ParseSizes(bad); err == nil {
			t.Errorf("ParseSizes(%q) accepted", bad)
		}
	}
}
