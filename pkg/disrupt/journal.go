package disrupt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnibench/cnibench/pkg/netns"
)

// ErrNotRestored is wrapped when a namespace's rules after an event's
// undo differ from what they were before the event.
var ErrNotRestored = errors.New("rules not restored")

// Journal records every change an event source makes, before it makes it:
// the namespaces it touches and their rules as they were (a digest of
// the canonical listing, Snapshot), fsynced. Restore entries follow once
// the change is undone and the rules are back byte for byte. A journal
// whose last change has no restore entry names what a killed run left
// changed; every such change lives inside the run's lab namespaces, which
// `cnibench lab clean` removes.
type Journal struct {
	path string
	f    *os.File
	seq  int
}

// journalEntry is one line of the journal.
type journalEntry struct {
	Time   time.Time         `json:"time"`
	Seq    int               `json:"seq"`
	Op     string            `json:"op"` // "change" or "restored"
	Event  string            `json:"event"`
	Before map[string]string `json:"before,omitempty"` // namespace → sha256 of its canonical rules
}

// journalDir is where the run's journals live, beside the labs' state.
func journalDir() string {
	root := os.Getenv("CNIBENCH_STATE_DIR")
	if root == "" {
		root = "/run/cnibench"
	}
	return filepath.Join(root, "disrupt")
}

// OpenJournal creates the journal of run id.
func OpenJournal(id string) (*Journal, error) {
	if err := os.MkdirAll(journalDir(), 0o755); err != nil {
		return nil, fmt.Errorf("disrupt journal: %w", err)
	}
	p := filepath.Join(journalDir(), "cnb-"+id+".jsonl")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("disrupt journal: %w", err)
	}
	return &Journal{path: p, f: f}, nil
}

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }

func (j *Journal) write(e journalEntry) error {
	e.Time = time.Now().UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("disrupt journal %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("disrupt journal %s: %w", j.path, err)
	}
	return nil
}

// Change records that event is about to change the rules of namespaces,
// with their digests now; it returns the record to check the restore
// against.
func (j *Journal) Change(ctx context.Context, event string, namespaces []string) (*Change, error) {
	before := map[string]string{}
	texts := map[string]string{}
	for _, ns := range namespaces {
		s, err := Snapshot(ctx, ns)
		if err != nil {
			return nil, err
		}
		before[ns], texts[ns] = digest(s), s
	}
	j.seq++
	if err := j.write(journalEntry{Seq: j.seq, Op: "change", Event: event, Before: before}); err != nil {
		return nil, err
	}
	return &Change{j: j, seq: j.seq, event: event, before: before, texts: texts}, nil
}

// Close closes the journal; with remove (every change restored), it
// deletes the file too.
func (j *Journal) Close(remove bool) error {
	err := j.f.Close()
	if remove {
		if rerr := os.Remove(j.path); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// Change is one journaled change.
type Change struct {
	j      *Journal
	seq    int
	event  string
	before map[string]string
	texts  map[string]string
	done   bool
}

// Verify checks that every namespace's rules are what they were before
// the change, and journals the restore.
func (c *Change) Verify(ctx context.Context) error {
	if c.done {
		return nil
	}
	var errs []error
	for ns, want := range c.before {
		s, err := Snapshot(ctx, ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if digest(s) != want {
			errs = append(errs, fmt.Errorf("%s in %s: %w: %s", c.event, ns, ErrNotRestored, firstDiff(c.texts[ns], s)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.done = true
	return c.j.write(journalEntry{Seq: c.seq, Op: "restored", Event: c.event})
}

// Snapshot is namespace ns's netfilter rules and links. The rules are canonical: `nft -s list
// ruleset` (no counters, no handles: neither is configuration), with each
// table's chains, sets and maps in name order — the kernel lists them in
// creation order, and a chain an update deletes and re-creates (an
// endpoint chain, as kube-proxy's own updates do) moves to the end while
// the rules stay the same. iptables-nft's rules are nftables rules and
// appear here too.
func Snapshot(ctx context.Context, ns string) (string, error) {
	cmd := exec.CommandContext(ctx, "nft", "-s", "list", "ruleset")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := netns.Start(ns, cmd); err != nil {
		return "", fmt.Errorf("snapshot rules of %s: %w (install the Debian package nftables)", ns, err)
	}
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("snapshot rules of %s: nft: %v: %s", ns, err, strings.TrimSpace(errb.String()))
	}
	links, err := linkSnapshot(ns)
	if err != nil {
		return "", err
	}
	return canonical(out.String()) + links, nil
}

// linkSnapshot lists ns's links by name with their MTU, state and
// addresses — what a daemon restart must give back. Not their ifindex or
// MAC address: a tap a restarted daemon makes again is a new device.
func linkSnapshot(ns string) (string, error) {
	h, err := netns.Handle(ns)
	if err != nil {
		return "", err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return "", fmt.Errorf("snapshot links of %s: %w", ns, err)
	}
	var lines []string
	for _, l := range links {
		a := l.Attrs()
		addrs, err := h.AddrList(l, unix.AF_INET)
		if err != nil {
			return "", fmt.Errorf("snapshot addresses of %s in %s: %w", a.Name, ns, err)
		}
		var as []string
		for _, ad := range addrs {
			as = append(as, ad.IPNet.String())
		}
		slices.Sort(as)
		lines = append(lines, fmt.Sprintf("link %s mtu %d up %t %s\n", a.Name, a.MTU, a.Flags&net.FlagUp != 0, strings.Join(as, ",")))
	}
	slices.Sort(lines)
	return strings.Join(lines, ""), nil
}

// canonical sorts the blocks one level inside each table by their text.
func canonical(s string) string {
	var b strings.Builder
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		b.WriteString(l + "\n")
		if !strings.HasPrefix(l, "table ") {
			continue
		}
		var blocks []string
		var cur strings.Builder
		for i++; i < len(lines) && lines[i] != "}"; i++ {
			cur.WriteString(lines[i] + "\n")
			if lines[i] == "\t}" {
				blocks = append(blocks, cur.String())
				cur.Reset()
			}
		}
		if cur.Len() > 0 {
			blocks = append(blocks, cur.String())
		}
		slices.Sort(blocks)
		for _, bl := range blocks {
			if strings.TrimSpace(bl) != "" {
				b.WriteString(bl)
			}
		}
		if i < len(lines) {
			b.WriteString("}\n")
		}
	}
	return b.String()
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// firstDiff names the first line where two listings differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d was %q, is %q", i+1, strings.TrimSpace(x), strings.TrimSpace(y))
		}
	}
	return "same lines"
}
