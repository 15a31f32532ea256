package datapath

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/cnibench/cnibench/pkg/errkind"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/profile"
)

// Program is one BPF program attached on a node.
type Program struct {
	// Hook is tcx, netkit, tc (a clsact cls_bpf filter), xdp or cgroup.
	Hook string `json:"hook"`
	// Device is the network device, or the cgroup directory for cgroup hooks.
	Device string `json:"device"`
	// Direction is ingress or egress (netkit: primary or peer; cgroup: the
	// attach point, e.g. connect4, sock_release).
	Direction string `json:"direction"`
	ID        uint32 `json:"id"`
	// Name is the program's full name: the function name the kernel
	// gives its JITed image in /proc/kallsyms (bpf_prog_<tag>_<name>),
	// else the kernel's 15-byte name (cil_from_contai).
	Name string `json:"name"`
	Tag  string `json:"tag,omitempty"`
	Type string `json:"type,omitempty"`
	// RunCount is how often it ran, counted only while the sysctl
	// kernel.bpf_stats_enabled is 1 (0 otherwise).
	RunCount uint64 `json:"run_count,omitempty"`
}

// ErrPermission: listing programs by id needs CAP_SYS_ADMIN (and querying
// a device or cgroup CAP_NET_ADMIN).
var ErrPermission = errors.New("listing attached BPF programs needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN")

// cgroupHooks are the cgroup attach points queried, with the names Cilium
// and bpftool give them.
var cgroupHooks = []struct {
	name string
	at   ebpf.AttachType
}{
	{"ingress", ebpf.AttachCGroupInetIngress}, {"egress", ebpf.AttachCGroupInetEgress},
	{"sock_create", ebpf.AttachCGroupInetSockCreate}, {"sock_release", ebpf.AttachCgroupInetSockRelease},
	{"sock_ops", ebpf.AttachCGroupSockOps}, {"bind4", ebpf.AttachCGroupInet4Bind},
	{"connect4", ebpf.AttachCGroupInet4Connect}, {"connect6", ebpf.AttachCGroupInet6Connect},
	{"post_bind4", ebpf.AttachCGroupInet4PostBind}, {"post_bind6", ebpf.AttachCGroupInet6PostBind},
	{"sendmsg4", ebpf.AttachCGroupUDP4Sendmsg}, {"sendmsg6", ebpf.AttachCGroupUDP6Sendmsg},
	{"recvmsg4", ebpf.AttachCGroupUDP4Recvmsg}, {"recvmsg6", ebpf.AttachCGroupUDP6Recvmsg},
	{"getpeername4", ebpf.AttachCgroupInet4GetPeername}, {"getpeername6", ebpf.AttachCgroupInet6GetPeername},
	{"getsockname4", ebpf.AttachCgroupInet4GetSockname}, {"getsockname6", ebpf.AttachCgroupInet6GetSockname},
}

// Attached lists the BPF programs attached in the calling thread's network
// namespace — per device and direction on tcx, netkit, tc (clsact) and
// XDP — and on each cgroup directory given (a socket load balancer's
// connect4, sendmsg4, … programs), ordered by device and direction.
// Program names come from kallsyms (nil: /proc/kallsyms).
func Attached(cgroups []string, kallsyms *ProgNames) ([]Program, error) {
	if kallsyms == nil {
		n, err := ReadProgNames()
		if err != nil {
			return nil, err
		}
		kallsyms = n
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []Program
	var firstErr error
	keep := func(ps []Program, err error) {
		out = append(out, ps...)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for _, l := range links {
		a := l.Attrs()
		for _, d := range []struct {
			hook, dir string
			at        ebpf.AttachType
		}{{"tcx", "ingress", ebpf.AttachTCXIngress}, {"tcx", "egress", ebpf.AttachTCXEgress},
			{"netkit", "primary", ebpf.AttachNetkitPrimary}, {"netkit", "peer", ebpf.AttachNetkitPeer}} {
			keep(query(a.Index, d.at, Program{Hook: d.hook, Device: a.Name, Direction: d.dir}, kallsyms))
		}
		for _, d := range []struct {
			dir    string
			parent uint32
		}{{"ingress", netlink.HANDLE_MIN_INGRESS}, {"egress", netlink.HANDLE_MIN_EGRESS}} {
			fl, err := netlink.FilterList(l, d.parent)
			if err != nil {
				continue // no clsact qdisc on this device
			}
			for _, f := range fl {
				if bf, ok := f.(*netlink.BpfFilter); ok {
					keep(describe(ebpf.ProgramID(bf.Id), Program{Hook: "tc", Device: a.Name, Direction: d.dir, Name: bf.Name, Tag: bf.Tag}, kallsyms))
				}
			}
		}
		if a.Xdp != nil && a.Xdp.ProgId != 0 {
			keep(describe(ebpf.ProgramID(a.Xdp.ProgId), Program{Hook: "xdp", Device: a.Name, Direction: "ingress"}, kallsyms))
		}
	}
	for _, cg := range cgroups {
		f, err := os.Open(cg)
		if err != nil {
			keep(nil, fmt.Errorf("cgroup %s: %w", cg, err))
			continue
		}
		for _, h := range cgroupHooks {
			keep(query(int(f.Fd()), h.at, Program{Hook: "cgroup", Device: cg, Direction: h.name}, kallsyms))
		}
		f.Close()
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Hook == "cgroup" || b.Hook == "cgroup" {
			return a.Hook != "cgroup" && b.Hook == "cgroup"
		}
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		return a.Direction < b.Direction
	})
	return out, firstErr
}

// query asks the kernel which programs are attached at one hook
// (BPF_PROG_QUERY). A hook the kernel does not have (netkit on a veth,
// tcx before 6.6) is no error: nothing is attached there.
func query(target int, at ebpf.AttachType, base Program, names *ProgNames) ([]Program, error) {
	r, err := link.QueryPrograms(link.QueryOptions{Target: target, Attach: at})
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("%w: query %s %s %s: %v", ErrPermission, base.Hook, base.Device, base.Direction, err)
		}
		return nil, nil
	}
	var out []Program
	var firstErr error
	for _, ap := range r.Programs {
		ps, err := describe(ap.ID, base, names)
		out = append(out, ps...)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return out, firstErr
}

// describe fills in a program's name, tag, type and run count by its id
// (BPF_PROG_GET_FD_BY_ID). Without the privilege the program is still
// listed, by id and whatever name the hook's own listing gave.
func describe(id ebpf.ProgramID, p Program, names *ProgNames) ([]Program, error) {
	p.ID = uint32(id)
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			err = fmt.Errorf("%w: program %d: %v", ErrPermission, id, err)
		} else {
			err = fmt.Errorf("program %d: %w", id, err)
		}
		if p.Name == "" {
			p.Name = "?"
		}
		return []Program{p}, err
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return []Program{p}, fmt.Errorf("program %d: %w", id, err)
	}
	p.Type, p.Tag, p.Name = info.Type.String(), info.Tag, info.Name
	if full := names.Full(info.Tag, info.Name); full != "" {
		p.Name = full
	}
	if n, ok := info.RunCount(); ok {
		p.RunCount = n
	}
	return []Program{p}, nil
}

// ProgNames holds the JITed programs' names from /proc/kallsyms:
// bpf_prog_<16 hex tag>_<name>, where name is the program's function name
// in full (the kernel keeps only 15 bytes of it in the program itself).
type ProgNames struct {
	byTag map[string][]string
}

// ReadProgNames reads /proc/kallsyms. Names need no privilege (only the
// addresses do).
func ReadProgNames() (*ProgNames, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, fmt.Errorf("read program names: %w", err)
	}
	defer f.Close()
	return ParseProgNames(f)
}

// ParseProgNames reads the kallsyms format; only JITed programs' symbols
// are kept.
func ParseProgNames(r io.Reader) (*ProgNames, error) {
	n := &ProgNames{byTag: map[string][]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		if tag, name, ok := profile.ProgSymbol(f[2]); ok {
			n.byTag[tag] = append(n.byTag[tag], name)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	return n, nil
}

// Full is the full name of the program with this tag whose kernel name
// (≤ 15 bytes) is short: programs of identical bytecode share a tag
// (Cilium's cil_sock4_recvmsg and cil_sock4_getpeername do), so the kernel
// name must start the symbol's. "" when kallsyms has none (a program not
// JITed, or bpf_jit_kallsyms off).
func (n *ProgNames) Full(tag, short string) string {
	if n == nil {
		return ""
	}
	for _, name := range n.byTag[tag] {
		if strings.HasPrefix(name, short) {
			return name
		}
	}
	return ""
}

// numbered devices are one kind of device repeated (a pod's lxc<hex>,
// veth<hex>): listed once, with how many.
var numbered = regexp.MustCompile(`^(lxc|veth|tap|cali|tmp)[0-9a-f]{4,}$`)

// Summarize lists attachments one line each — "eth0 tcx ingress
// cil_from_netdev", "lxc* (3) tcx ingress cil_from_container", "cgroup
// connect4 cil_sock4_connect" — with a pod's devices folded into one line
// per program when they all carry the same one.
func Summarize(ps []Program) []string {
	type key struct{ dev, hook, dir, name string }
	count := map[key]int{}
	var order []key
	for _, p := range ps {
		dev := p.Device
		if m := numbered.FindStringSubmatch(dev); m != nil {
			dev = m[1] + "*"
		}
		if p.Hook == "cgroup" {
			dev = "cgroup"
		}
		k := key{dev, p.Hook, p.Direction, p.Name}
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		switch {
		case k.hook == "cgroup":
			out = append(out, "cgroup "+k.dir+" "+k.name)
		case strings.HasSuffix(k.dev, "*"):
			out = append(out, k.dev+" ("+strconv.Itoa(count[k])+") "+k.hook+" "+k.dir+" "+k.name)
		default:
			out = append(out, k.dev+" "+k.hook+" "+k.dir+" "+k.name)
		}
	}
	return out
}

// WriteAttached prints the programs as a table.
func WriteAttached(w io.Writer, ps []Program) error {
	if len(ps) == 0 {
		_, err := fmt.Fprintln(w, "no BPF program attached")
		return err
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%-8s %-40s %-13s %7s %-24s %-16s %s\n", "HOOK", "DEVICE", "DIRECTION", "ID", "NAME", "TAG", "RUNS")
	for _, p := range ps {
		runs := "-"
		if p.RunCount > 0 {
			runs = strconv.FormatUint(p.RunCount, 10)
		}
		fmt.Fprintf(bw, "%-8s %-40s %-13s %7d %-24s %-16s %s\n", p.Hook, p.Device, p.Direction, p.ID, p.Name, p.Tag, runs)
	}
	return bw.Flush()
}

// AttachedHelp is `cnibench probe attached --help`'s description.
const AttachedHelp = `Lists every BPF program attached to a network device — tcx and netkit (by
BPF_PROG_QUERY, which Debian 12's bpftool cannot show), clsact cls_bpf filters, XDP —
by device and direction, and on the cgroup directories given (a socket load balancer's
connect4, sendmsg4, … programs), with each program's id, full name (from
/proc/kallsyms), tag and run count (counted while kernel.bpf_stats_enabled=1).
--netns lists another network namespace's devices (a k8slab node: --netns k8slab-n1).
Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN).`

// AttachedCommand is `cnibench probe attached`: the programs attached in a
// network namespace (the current one when Netns is "") and on cgroups.
type AttachedCommand struct {
	Netns   string
	Cgroups []string
}

// Run lists the programs. An unknown namespace or cgroup directory is an
// ErrInvalid; missing privilege an ErrPermission.
func (c AttachedCommand) Run() ([]Program, error) {
	if c.Netns != "" && !netns.Exists(c.Netns) {
		return nil, errkind.Errorf(ErrInvalid, "--netns %s: no such network namespace in %s", c.Netns, netns.Dir)
	}
	for _, cg := range c.Cgroups {
		if st, err := os.Stat(cg); err != nil || !st.IsDir() {
			return nil, errkind.Errorf(ErrInvalid, "--cgroup %s: not a directory", cg)
		}
	}
	names, err := ReadProgNames()
	if err != nil {
		return nil, err
	}
	ps := []Program{}
	list := func() error {
		got, err := Attached(c.Cgroups, names)
		ps = append(ps, got...)
		return err
	}
	if c.Netns == "" {
		err = list()
	} else {
		// Entered with setns on a locked thread: `ip netns exec` would also
		// remount /sys, hiding the cgroup directories asked for.
		err = netns.Do(c.Netns, list)
	}
	return ps, err
}
