package disrupt

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRequestsRoundTrip: what a probe pod prints is what the runner reads
// back, among other log lines, for an empty list, one request, and 60 s of
// udp-rr at 1000/s (several lines, every outcome, a sender that stalled).
func TestRequestsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	long := make([]Request, 60000)
	sent := time.Duration(0)
	for i := range long {
		sent += time.Millisecond + time.Duration(rng.IntN(200_000)) - 100_000
		if i == 30000 {
			sent += 2 * time.Second // a stall
		}
		r := Request{Sent: sent, Outcome: Outcome(rng.IntN(3))}
		if r.Outcome == OK {
			r.Latency = time.Duration(50_000 + rng.IntN(5_000_000))
		}
		long[i] = r
	}
	for _, tc := range []struct {
		name string
		reqs []Request
	}{
		{"none", []Request{}},
		{"one", []Request{{Sent: 3 * time.Millisecond, Latency: 123456, Outcome: OK}}},
		{"negative first send", []Request{{Sent: -40 * time.Microsecond, Outcome: Timeout}, {Sent: time.Millisecond, Outcome: Failed}}},
		{"60s", long},
	} {
		var b bytes.Buffer
		b.WriteString("cnibench k8s disrupt-probe: started\n")
		if err := EncodeRequests(&b, TCPCRR, tc.reqs); err != nil {
			t.Fatal(err)
		}
		b.WriteString("a later line\n")
		for _, line := range strings.Split(b.String(), "\n") {
			if len(line) > 16*1024 {
				t.Fatalf("%s: a %d-character line: a container runtime would cut it", tc.name, len(line))
			}
		}
		probe, got, err := DecodeRequests(b.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if probe != TCPCRR || !slices.Equal(got, tc.reqs) {
			t.Errorf("%s: decoded %s with %d requests, want %s with %d (equal: %v)", tc.name, probe, len(got), TCPCRR, len(tc.reqs), slices.Equal(got, tc.reqs))
		}
		if tc.name == "60s" {
			t.Logf("60 s of udp-rr at 1000/s: %d bytes of log", b.Len())
		}
	}
}

// TestDecodeRequestsRefuses: a log cut short, chunks out of order or
// tampered with is an ErrWire, never a shorter list.
func TestDecodeRequestsRefuses(t *testing.T) {
	reqs := make([]Request, 20000)
	for i := range reqs {
		reqs[i] = Request{Sent: time.Duration(i) * time.Millisecond, Latency: time.Duration(i * 997 % 100000), Outcome: Outcome(i % 3)}
	}
	var b bytes.Buffer
	if err := EncodeRequests(&b, UDPRR, reqs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("want several lines for 20,000 requests, got %d", len(lines))
	}
	cases := map[string]string{
		"nothing":      "hello\n",
		"cut short":    strings.Join(lines[:len(lines)-1], "\n"),
		"out of order": strings.Join(append([]string{lines[1], lines[0]}, lines[2:]...), "\n"),
		"bad base64":   strings.Replace(b.String(), lines[0][len(lines[0])-10:], "!!!!!!!!!!", 1),
	}
	for name, log := range cases {
		if _, got, err := DecodeRequests([]byte(log)); !errors.Is(err, ErrWire) {
			t.Errorf("%s: got %d requests and %v, want ErrWire", name, len(got), err)
		}
	}
}
