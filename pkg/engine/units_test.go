package engine

import (
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
)

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
