package limits

import (
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
)

func TestCheckSize(t *testing.T) {
	for _, tc := range []struct {
		test string
		size int
		ok   bool
	}{
		{result.UDPBW, 1, true},
		{result.UDPBW, 0, false},
		{result.UDPLat, MaxUDPPayload, true},
		{result.UDPLat, MaxUDPPayload + 1, false},
		{result.TCPBW, MaxUDPPayload + 1, true},
		{result.TCPBW, MaxMsgSize, true},
		{result.TCPBW, 32 << 20, false},
		{result.TCPLat, 0, false},
	} {
		if err := CheckSize(tc.test, tc.size); (err == nil) != tc.ok {
			t.Errorf("CheckSize(%s, %d) = %v, want ok=%v", tc.test, tc.size, err, tc.ok)
		}
	}
}
