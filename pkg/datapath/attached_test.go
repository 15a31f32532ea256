package datapath

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/cnibench/cnibench/internal/testns"
	"github.com/cnibench/cnibench/pkg/netns"
	"github.com/cnibench/cnibench/pkg/runid"
)

// captured is a program as the research lister (bpfls) printed it on a
// Cilium node: the kernel's short name, the kallsyms symbol and its name.
type captured struct {
	Hook, Device, Direction string
	ID                      uint32
	Name, FullName, Ksym    string
	Tag                     string
}

func (c *captured) UnmarshalJSON(b []byte) error {
	var v struct {
		Hook      string `json:"hook"`
		Device    string `json:"device"`
		Direction string `json:"direction"`
		ID        uint32 `json:"id"`
		Name      string `json:"name"`
		FullName  string `json:"full_name"`
		Ksym      string `json:"ksym"`
		Tag       string `json:"tag"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = captured{v.Hook, v.Device, v.Direction, v.ID, v.Name, v.FullName, v.Ksym, v.Tag}
	return nil
}

// attachedCapture lists a node's programs per device and cgroup hook (the
// capture's "link:" rows, every bpf_link of the kernel, are left out: they
// are not per device).
func attachedCapture(t *testing.T, mode string) []captured {
	t.Helper()
	var all []captured
	if err := json.Unmarshal(read(t, mode, "bpf-attached.json"), &all); err != nil {
		t.Fatal(err)
	}
	var out []captured
	for _, c := range all {
		if !strings.HasPrefix(c.Hook, "link:") {
			out = append(out, c)
		}
	}
	return out
}

// TestProgNamesCaptured: kallsyms lines carrying the captured programs'
// real symbols give every program its full name back from its tag and
// 15-byte kernel name — also the two of identical bytecode (one tag).
func TestProgNamesCaptured(t *testing.T) {
	progs := attachedCapture(t, "vxlan-kpr-nokp")
	var ks strings.Builder
	ks.WriteString("ffffffff81000000 T _stext\nffffffffc0025b80 t bpf_dispatcher_xdp\t[bpf]\n")
	for i, p := range progs {
		fmt.Fprintf(&ks, "ffffffffa%07x t %s\t[bpf]\n", i*0x1000, p.Ksym)
	}
	names, err := ParseProgNames(strings.NewReader(ks.String()))
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for _, p := range progs {
		if got := names.Full(p.Tag, p.Name); got != p.FullName {
			t.Errorf("tag %s short %q: %q, want %q", p.Tag, p.Name, got, p.FullName)
		}
		if len(names.byTag[p.Tag]) > 1 {
			shared++
		}
	}
	if shared == 0 {
		t.Error("the capture has no two programs sharing a tag: the case this guards is not exercised")
	}
	if names.Full("0000000000000000", "x") != "" || (*ProgNames)(nil).Full("a", "b") != "" {
		t.Error("unknown tag named")
	}
}

func TestSummarizeCaptured(t *testing.T) {
	for mode, want := range map[string][]string{
		"native-kp": {
			"cilium_net tcx ingress cil_to_host", "cilium_host tcx ingress cil_to_host", "cilium_host tcx egress cil_from_host",
			"lxc* (1) tcx ingress cil_from_container", "eth0 tcx ingress cil_from_netdev",
		},
		"vxlan-kpr-nokp": {
			"cgroup sock_release cil_sock_release", "cgroup connect4 cil_sock4_connect", "cgroup connect6 cil_sock6_connect",
			"cgroup post_bind4 cil_sock4_post_bind", "cgroup sendmsg4 cil_sock4_sendmsg", "cgroup recvmsg4 cil_sock4_recvmsg",
			"cgroup sendmsg6 cil_sock6_sendmsg", "cgroup recvmsg6 cil_sock6_recvmsg", "cgroup getpeername4 cil_sock4_getpeername",
			"cgroup getpeername6 cil_sock6_getpeername", "cilium_net tcx ingress cil_to_host", "cilium_host tcx ingress cil_to_host",
			"cilium_host tcx egress cil_from_host", "cilium_vxlan tcx ingress cil_from_overlay", "cilium_vxlan tcx egress cil_to_overlay",
			"lxc* (1) tcx ingress cil_from_container", "eth0 tcx ingress cil_from_netdev", "eth0 tcx egress cil_to_netdev",
		},
	} {
		var ps []Program
		for _, c := range attachedCapture(t, mode) {
			ps = append(ps, Program{Hook: c.Hook, Device: c.Device, Direction: c.Direction, ID: c.ID, Name: c.FullName, Tag: c.Tag})
		}
		if got := Summarize(ps); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", mode, got, want)
		}
	}
	two := Summarize([]Program{{Hook: "tcx", Device: "lxc0123abcd", Direction: "ingress", Name: "p"},
		{Hook: "tcx", Device: "lxc4567ef01", Direction: "ingress", Name: "p"}})
	if len(two) != 1 || two[0] != "lxc* (2) tcx ingress p" {
		t.Errorf("two pods: %q", two)
	}
}

func sockAddrProg(t *testing.T) *ebpf.Program {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "cnb_connect4", Type: ebpf.CGroupSockAddr, License: "GPL",
		AttachType: ebpf.AttachCGroupInet4Connect, Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}})
	if err != nil {
		t.Skipf("load a cgroup/connect4 program: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestPrivAttached attaches programs the way Cilium does — tcx on a
// device's ingress, a clsact cls_bpf filter on its egress (Cilium before
// tcx), a cgroup connect4 program — and finds each with its device,
// direction and name.
func TestPrivAttached(t *testing.T) {
	testns.NeedRoot(t)
	ns := testns.NewNetns(t, "att")
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "cnb_tcx_ingress", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Skipf("load a tc program: %v", err)
	}
	defer prog.Close()
	var got []Program
	var cgroups []string
	err = netns.Do(ns, func() error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "lxc0123abcd"}, PeerName: "cnbpeer0"}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		l, err := netlink.LinkByName("lxc0123abcd")
		if err != nil {
			return err
		}
		tl, err := link.AttachTCX(link.TCXOptions{Interface: l.Attrs().Index, Program: prog, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			t.Skipf("tcx: %v", err)
		}
		defer tl.Close()
		if err := netlink.QdiscAdd(&netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index,
			Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}); err != nil {
			return fmt.Errorf("clsact: %w", err)
		}
		if err := netlink.FilterAdd(&netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: l.Attrs().Index,
			Parent: netlink.HANDLE_MIN_EGRESS, Handle: 1, Protocol: 3 /* ETH_P_ALL */, Priority: 1},
			Fd: prog.FD(), Name: "cnb-egress", DirectAction: true}); err != nil {
			return fmt.Errorf("cls_bpf: %w", err)
		}
		cg := ""
		if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil {
			cg = filepath.Join("/sys/fs/cgroup/unified", runid.Name(runid.New(), "att"))
		} else if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
			cg = filepath.Join("/sys/fs/cgroup", runid.Name(runid.New(), "att"))
		}
		if cg != "" {
			if err := os.Mkdir(cg, 0o755); err != nil {
				return err
			}
			defer os.Remove(cg)
			cl, err := link.AttachCgroup(link.CgroupOptions{Path: cg, Attach: ebpf.AttachCGroupInet4Connect, Program: sockAddrProg(t)})
			if err != nil {
				return fmt.Errorf("cgroup connect4: %w", err)
			}
			defer cl.Close()
			cgroups = []string{cg}
		}
		got, err = Attached(cgroups, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"tcx lxc0123abcd ingress cnb_tcx_ingress": false, "tc lxc0123abcd egress cnb_tcx_ingress": false}
	if len(cgroups) > 0 {
		want["cgroup cg connect4 cnb_connect4"] = false
	} else {
		t.Log("no cgroup2 hierarchy: the cgroup hook is not tested")
	}
	for _, p := range got {
		dev := p.Device
		if p.Hook == "cgroup" {
			dev = "cg"
		}
		k := p.Hook + " " + dev + " " + p.Direction + " " + p.Name
		if _, ok := want[k]; ok {
			want[k] = true
		}
		if p.ID == 0 || p.Tag == "" || p.Type == "" {
			t.Errorf("%s: id %d tag %q type %q", k, p.ID, p.Tag, p.Type)
		}
	}
	for k, found := range want {
		if !found {
			t.Errorf("not listed: %s (got %+v)", k, got)
		}
	}
	var b strings.Builder
	if err := WriteAttached(&b, got); err != nil || !strings.Contains(b.String(), "cnb_tcx_ingress") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
}
