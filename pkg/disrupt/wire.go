package disrupt

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cnibench/cnibench/pkg/atomicfile"
	"github.com/cnibench/cnibench/pkg/errkind"
)

// A probe that runs elsewhere (in a pod: `cnibench k8s disrupt-probe`)
// hands its requests back through its log, the only channel a runner is
// sure to have: gzip of a compact binary form, base64, cut into lines of
// wireChunk characters so that no container runtime splits one (CRI log
// lines are cut at 16 KiB).
//
//	cnb-disrupt-requests <probe> <i>/<n> <base64 chunk>
//
// The binary form is "CNBR1", the request count (uvarint), then per
// request its send time minus the previous one's (varint, ns), and its
// latency in ns shifted left by 2 with the outcome in the low bits
// (uvarint). 60 s of udp-rr at 1000/s is about 150 KB of log.
const (
	wirePrefix = "cnb-disrupt-requests "
	wireMagic  = "CNBR1"
	wireChunk  = 4000
)

// ErrWire is matched by DecodeRequests' errors: the log holds no complete,
// well-formed request list.
var ErrWire = errors.New("no request list in the probe's output")

// EncodeRequests writes reqs, probe's requests in send order, as the
// lines DecodeRequests reads.
func EncodeRequests(w io.Writer, probe ProbeKind, reqs []Request) error {
	var raw bytes.Buffer
	raw.WriteString(wireMagic)
	var b [binary.MaxVarintLen64]byte
	raw.Write(b[:binary.PutUvarint(b[:], uint64(len(reqs)))])
	var prev int64
	for _, r := range reqs {
		raw.Write(b[:binary.PutVarint(b[:], int64(r.Sent)-prev)])
		prev = int64(r.Sent)
		raw.Write(b[:binary.PutUvarint(b[:], uint64(max(r.Latency, 0))<<2|uint64(r.Outcome&3))])
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	s := base64.StdEncoding.EncodeToString(gz.Bytes())
	n := max(1, (len(s)+wireChunk-1)/wireChunk)
	bw := bufio.NewWriter(w)
	for i := 0; i < n; i++ {
		chunk := s[min(i*wireChunk, len(s)):min((i+1)*wireChunk, len(s))]
		fmt.Fprintf(bw, "%s%s %d/%d %s\n", wirePrefix, probe, i+1, n, chunk)
	}
	return bw.Flush()
}

// DecodeRequests reads the request list EncodeRequests wrote among a
// log's other lines, and which probe made it.
func DecodeRequests(log []byte) (ProbeKind, []Request, error) {
	var probe ProbeKind
	var chunks []string
	total := 0
	for _, line := range strings.Split(string(log), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), wirePrefix)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 3 {
			return "", nil, fmt.Errorf("%w: a request line has %d fields, want 3", ErrWire, len(f))
		}
		is, ns, _ := strings.Cut(f[1], "/")
		i, err1 := strconv.Atoi(is)
		n, err2 := strconv.Atoi(ns)
		if err1 != nil || err2 != nil || i != len(chunks)+1 || (total != 0 && n != total) || (probe != "" && ProbeKind(f[0]) != probe) {
			return "", nil, fmt.Errorf("%w: request line %q out of order", ErrWire, f[1])
		}
		probe, total = ProbeKind(f[0]), n
		chunks = append(chunks, f[2])
	}
	if total == 0 || len(chunks) != total {
		return "", nil, fmt.Errorf("%w: %d of %d request lines", ErrWire, len(chunks), total)
	}
	gz, err := base64.StdEncoding.DecodeString(strings.Join(chunks, ""))
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrWire, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrWire, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrWire, err)
	}
	rd := bytes.NewReader(raw)
	magic := make([]byte, len(wireMagic))
	if _, err := io.ReadFull(rd, magic); err != nil || string(magic) != wireMagic {
		return "", nil, fmt.Errorf("%w: not a %s request list", ErrWire, wireMagic)
	}
	count, err := binary.ReadUvarint(rd)
	if err != nil || count > uint64(len(raw)) { // each request takes 2 bytes at least
		return "", nil, fmt.Errorf("%w: bad request count", ErrWire)
	}
	reqs := make([]Request, count)
	var prev int64
	for i := range reqs {
		d, err1 := binary.ReadVarint(rd)
		v, err2 := binary.ReadUvarint(rd)
		if err1 != nil || err2 != nil || Outcome(v&3) > Timeout {
			return "", nil, fmt.Errorf("%w: request %d of %d truncated or malformed", ErrWire, i+1, count)
		}
		prev += d
		reqs[i] = Request{Sent: time.Duration(prev), Latency: time.Duration(int64(v >> 2)), Outcome: Outcome(v & 3)}
	}
	if rd.Len() != 0 {
		return "", nil, fmt.Errorf("%w: %d bytes after the last request", ErrWire, rd.Len())
	}
	return probe, reqs, nil
}

// ReadResult reads a result document `disrupt run -o` or `k8s disrupt -o`
// wrote; every error names the file and matches ErrInvalid.
func ReadResult(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, errkind.Errorf(ErrInvalid, "%v (give a JSON file written by `disrupt run -o` or `k8s disrupt -o`)", err)
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil || r.Name == "" {
		return nil, errkind.Errorf(ErrInvalid, "%s is not a disruption result (written by `disrupt run -o` or `k8s disrupt -o`)", path)
	}
	if r.Schema != Schema {
		return nil, errkind.Errorf(ErrInvalid, "%s has schema %q; this cnibench reads %q", path, r.Schema, Schema)
	}
	return &r, nil
}

// WriteFiles writes r as JSON to jsonPath and as the HTML page to
// htmlPath, each atomically; an empty path is skipped.
func WriteFiles(r *Result, jsonPath, htmlPath string) error {
	var errs []error
	if jsonPath != "" {
		errs = append(errs, atomicfile.Write(jsonPath, 0o644, func(w io.Writer) error { return writeJSON(w, r) }))
	}
	if htmlPath != "" {
		errs = append(errs, atomicfile.Write(htmlPath, 0o644, func(w io.Writer) error { return WriteHTML(w, r) }))
	}
	return errors.Join(errs...)
}

// WaitUntil sleeps until t or ctx ends; false when ctx ended. The
// runners that fire events at planned instants elsewhere (k8s disrupt)
// keep time as the probes do.
func WaitUntil(ctx context.Context, t time.Time) bool { return waitUntil(ctx, t) }

// ReadProcInt reads a number from a /proc file (a sysctl); nil when it
// cannot, for a caller that watches one as the arms do nf_conntrack_max.
func ReadProcInt(path string) *int { return readInt(path) }
