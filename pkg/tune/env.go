package tune

import (
	"errors"
	"path/filepath"

	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/ovsdb"
)

// Env is where knobs read and write: the roots of /proc, /sys and /dev, the
// network namespace for per-namespace knobs, and the APIs that talk to NICs
// and Open vSwitch (replaceable in tests).
type Env struct {
	ProcRoot string // default /proc
	SysRoot  string // default /sys
	DevRoot  string // default /dev
	// Netns, when set, runs per-namespace reads and writes inside that named
	// namespace (through pkg/netns.Do).
	Netns string
	// NIC talks ethtool to interfaces; nil uses the kernel (SIOCETHTOOL).
	NIC NICTool
	// OVSDB is the path of ovsdb-server's unix socket.
	OVSDB string
	// Rules counts kube-proxy rules; nil uses nftables netlink.
	Rules RuleCounter
	// Links lists tunnel and pod interfaces for the MTU check; nil uses netlink.
	Links LinkLister
	// LabNetns are extra namespaces (a lab's) whose MTUs are checked.
	LabNetns []string
}

// DefaultEnv returns an Env on the real host.
func DefaultEnv() *Env {
	return &Env{ProcRoot: "/proc", SysRoot: "/sys", DevRoot: "/dev", OVSDB: ovsdb.DefaultSocket}
}

// WithNetns returns a copy of e that works inside the named namespace.
func (e *Env) WithNetns(name string) *Env {
	c := *e
	c.Netns = name
	return &c
}

func (e *Env) proc(p ...string) string { return filepath.Join(append([]string{e.ProcRoot}, p...)...) }
func (e *Env) sys(p ...string) string  { return filepath.Join(append([]string{e.SysRoot}, p...)...) }
func (e *Env) dev(p ...string) string  { return filepath.Join(append([]string{e.DevRoot}, p...)...) }

// do runs fn inside e.Netns, or in the caller's namespace when it is empty.
// /proc/sys/net shows the namespace of the thread that opens the file, so the
// open must happen on the switched thread.
func (e *Env) do(fn func() error) error {
	if e.Netns == "" {
		return fn()
	}
	return netns.Do(e.Netns, fn)
}

func (e *Env) nic() NICTool {
	if e.NIC == nil {
		e.NIC = kernelNIC{}
	}
	return e.NIC
}

// ErrLiveOnly is what a knob that can only ask the live kernel (ethtool,
// netlink, nftables) reports in an Env rooted at a fixture tree.
var ErrLiveOnly = errors.New("not available with --root: this knob asks the live kernel (ethtool/netlink/nftables)")

// EnvAt is the knob environment with /proc, /sys, /dev and the OVSDB
// socket under root. With a root other than "/", knobs that can only ask
// the live kernel report ErrLiveOnly instead of mixing live values into a
// fixture audit.
func EnvAt(root string) *Env {
	e := DefaultEnv()
	if root == "" || root == "/" {
		return e
	}
	e.ProcRoot = filepath.Join(root, "proc")
	e.SysRoot = filepath.Join(root, "sys")
	e.DevRoot = filepath.Join(root, "dev")
	e.OVSDB = filepath.Join(root, ovsdb.DefaultSocket)
	e.NIC, e.Links, e.Rules = liveOnly{}, liveOnly{}, liveOnly{}
	return e
}

type liveOnly struct{}

func (liveOnly) Driver(string) (string, error)               { return "", ErrLiveOnly }
func (liveOnly) Ring(string) (Ring, error)                   { return Ring{}, ErrLiveOnly }
func (liveOnly) SetRing(string, uint32, uint32) error        { return ErrLiveOnly }
func (liveOnly) Features(string) (map[string]Feature, error) { return nil, ErrLiveOnly }
func (liveOnly) SetFeature(string, string, bool) error       { return ErrLiveOnly }
func (liveOnly) Links(string) ([]LinkInfo, error)            { return nil, ErrLiveOnly }
func (liveOnly) KubeProxyRules() (int, int, error)           { return 0, 0, ErrLiveOnly }
