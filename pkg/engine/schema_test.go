package engine

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cnibench/cnibench/pkg/result"
)

// lookup walks a decoded JSON document by a dotted path.
func lookup(doc map[string]any, path ...string) (any, bool) {
	var cur any = doc
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// TestJSONFieldNames pins the names docs/json-schema.md documents, and that
// a value the test cannot produce is null with a reason, never 0.
func TestJSONFieldNames(t *testing.T) {
	s := startServer(t)
	docs := map[string]map[string]any{}
	for _, test := range []string{result.TCPLat, result.TCPBW, result.UDPBW} {
		r, err := Run(context.Background(), opts(s, test, 64))
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(&result.Set{Schema: result.SetSchemaVersion, Results: []*result.Result{r}})
		if err != nil {
			t.Fatal(err)
		}
		set, err := result.DecodeSet(b)
		if err != nil || len(set.Results) != 1 {
			t.Fatalf("decode set: %v", err)
		}
		var doc map[string]any
		_ = json.Unmarshal(b, &doc)
		docs[test] = doc["results"].([]any)[0].(map[string]any)
	}
	present := map[string][][]string{
		result.TCPLat: {
			{"latency", "rtt_ns", "mean"}, {"latency", "rtt_ns", "p50"}, {"latency", "rtt_ns", "p99_9"}, {"latency", "rtt_ns", "stddev"},
			{"latency", "one_way_ns", "mean"}, {"latency", "cdf"}, {"transactions", "per_sec"}, {"tcp", "retransmits"},
			{"cpu", "client", "process_seconds"}, {"cpu", "server", "softirq_pct"}, {"cpu", "server", "us_per_transaction"},
			{"cpu", "client", "ran_on"}, {"cpu", "server", "ran_on"},
			{"env", "server", "kernel"}, {"env", "client", "cnibench_version"}, {"duration_seconds"}, {"warmup_seconds"},
		},
		result.TCPBW: {
			{"throughput", "sender_bps"}, {"throughput", "receiver_bps"}, {"throughput", "bytes_received"},
			{"cpu", "client", "seconds_per_gb"}, {"cpu", "server", "seconds_per_gb"}, {"cpu", "server", "ran_on"},
		},
		result.UDPBW: {
			{"udp", "sent"}, {"udp", "received"}, {"udp", "lost"}, {"udp", "out_of_order"}, {"udp", "duplicated"},
			{"udp", "loss_pct"}, {"udp", "jitter_ns"}, {"udp", "kernel_rcvbuf_errors"}, {"udp", "kernel_in_errors"},
			{"throughput", "receiver_pps"}, {"throughput", "sender_pps"}, {"cpu", "client", "ran_on"},
		},
	}
	for test, paths := range present {
		for _, p := range paths {
			if v, ok := lookup(docs[test], p...); !ok || v == nil {
				t.Errorf("%s: %v missing or null", test, p)
			}
		}
	}
	// tcp_bw has no packet rate: null, with a reason.
	for _, f := range []string{"sender_pps", "receiver_pps"} {
		v, ok := lookup(docs[result.TCPBW], "throughput", f)
		if !ok || v != nil {
			t.Errorf("tcp_bw throughput.%s = %v, want null", f, v)
		}
		if why, _ := lookup(docs[result.TCPBW], "missing", "throughput."+f); why == nil || why == "" {
			t.Errorf("tcp_bw throughput.%s null without a reason", f)
		}
	}
	// tcp_lat moves no bulk data: seconds_per_gb is null with a reason.
	if v, _ := lookup(docs[result.TCPLat], "cpu", "client", "seconds_per_gb"); v != nil {
		t.Errorf("tcp_lat seconds_per_gb = %v", v)
	}
	if why, _ := lookup(docs[result.TCPLat], "missing", "cpu.client.seconds_per_gb"); why == nil {
		t.Error("tcp_lat seconds_per_gb null without a reason")
	}
}
