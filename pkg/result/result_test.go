package result

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMissingIsNullNotZero(t *testing.T) {
	r := New(Tool{Name: "cnibench", Version: "t"}, TCPBW, 1024)
	r.Throughput = &Throughput{SenderBps: F(1e9)}
	r.SetMissing("throughput.receiver_bps", "server did not report")
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, `"receiver_bps":null`) {
		t.Errorf("receiver_bps not null: %s", s)
	}
	if !strings.Contains(s, `"throughput.receiver_bps":"server did not report"`) {
		t.Errorf("reason missing: %s", s)
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Throughput.ReceiverBps != nil {
		t.Error("null decoded as a value")
	}
	if _, ok := PrimaryMetric(TCPBW).Get(back); ok {
		t.Error("metric of a missing value reported ok")
	}
}

func TestDecodeRejectsOtherSchema(t *testing.T) {
	if _, err := Decode([]byte(`{"schema":"cnibench.result/v0"}`)); err == nil {
		t.Fatal("accepted a foreign schema")
	}
}

// The decoders' errors name the document and both schemas; users see them
// as is, so their text is pinned here.
func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		err  func() error
		want string
	}{
		{"result, not JSON", func() error { _, err := Decode([]byte(`{`)); return err },
			"decode result: unexpected end of JSON input"},
		{"result, other schema", func() error { _, err := Decode([]byte(`{"schema":"cnibench.result/v0"}`)); return err },
			`decode result: schema "cnibench.result/v0", this cnibench reads "cnibench.result/v1"`},
		{"set, not JSON", func() error { _, err := DecodeSet([]byte(`[]`)); return err },
			"decode result set: json: cannot unmarshal array into Go value of type result.Set"},
		{"set, other schema", func() error { _, err := DecodeSet([]byte(`{"schema":"cnibench.results/v0"}`)); return err },
			`decode result set: schema "cnibench.results/v0", this cnibench reads "cnibench.results/v1"`},
		{"set, result of other schema", func() error {
			_, err := DecodeSet([]byte(`{"schema":"cnibench.results/v1","results":[{"schema":"cnibench.result/v1"},{"schema":"x"}]}`))
			return err
		}, `decode result set: result 1: schema is not "cnibench.result/v1"`},
	} {
		err := c.err()
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := DecodeSet([]byte(`{"schema":"cnibench.results/v1","results":[{"schema":"cnibench.result/v1"}]}`)); err != nil {
		t.Errorf("a valid set: %v", err)
	}
}

func TestPrimaryMetricUnits(t *testing.T) {
	r := New(Tool{Name: "x"}, TCPLat, 1)
	r.Latency = &Latency{OneWayNs: Dist{Count: 1, Mean: F(9500)}}
	v, ok := PrimaryMetric(TCPLat).Get(r)
	if !ok || v != 9.5 {
		t.Fatalf("one-way mean = %v,%v; want 9.5 us", v, ok)
	}
}
