package tune

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// NIC knobs: ring sizes, offloads, IRQ affinity and irqbalance. Interfaces
// are listed from /sys/class/net under the sys root; ethtool calls go through
// NICTool so fixtures can stand in for hardware.

// Ring is a NIC's current and maximum ring sizes.
type Ring struct{ RX, TX, RXMax, TXMax uint32 }

// Feature is one offload's state: Fixed means the driver does not let it change.
type Feature struct{ Active, Fixed bool }

// NICTool is the ethtool surface the NIC knobs need.
type NICTool interface {
	Driver(ifname string) (string, error)
	Ring(ifname string) (Ring, error)
	SetRing(ifname string, rx, tx uint32) error
	Features(ifname string) (map[string]Feature, error)
	SetFeature(ifname, feature string, on bool) error
}

// kernelNIC uses the SIOCETHTOOL ioctl through github.com/safchain/ethtool.
type kernelNIC struct{}

func withEthtool[T any](fn func(*ethtool.Ethtool) (T, error)) (T, error) {
	var zero T
	et, err := ethtool.NewEthtool()
	if err != nil {
		return zero, fmt.Errorf("ethtool socket: %w", err)
	}
	defer et.Close()
	return fn(et)
}

func (kernelNIC) Driver(ifname string) (string, error) {
	return withEthtool(func(et *ethtool.Ethtool) (string, error) { return et.DriverName(ifname) })
}

func (kernelNIC) Ring(ifname string) (Ring, error) {
	return withEthtool(func(et *ethtool.Ethtool) (Ring, error) {
		r, err := et.GetRing(ifname)
		if err != nil {
			return Ring{}, err
		}
		return Ring{RX: r.RxPending, TX: r.TxPending, RXMax: r.RxMaxPending, TXMax: r.TxMaxPending}, nil
	})
}

func (kernelNIC) SetRing(ifname string, rx, tx uint32) error {
	_, err := withEthtool(func(et *ethtool.Ethtool) (struct{}, error) {
		r, err := et.GetRing(ifname)
		if err != nil {
			return struct{}{}, err
		}
		r.RxPending, r.TxPending = rx, tx
		_, err = et.SetRing(ifname, r)
		return struct{}{}, err
	})
	return err
}

func (kernelNIC) Features(ifname string) (map[string]Feature, error) {
	return withEthtool(func(et *ethtool.Ethtool) (map[string]Feature, error) {
		fs, err := et.FeaturesWithState(ifname)
		if err != nil {
			return nil, err
		}
		out := make(map[string]Feature, len(fs))
		for k, v := range fs {
			out[k] = Feature{Active: v.Active, Fixed: !v.Available}
		}
		return out, nil
	})
}

// SetFeatures changes several features in one SIOCETHTOOL call.
func (kernelNIC) SetFeatures(ifname string, set map[string]bool) error {
	_, err := withEthtool(func(et *ethtool.Ethtool) (struct{}, error) {
		return struct{}{}, et.Change(ifname, set)
	})
	return err
}

func (kernelNIC) SetFeature(ifname, feature string, on bool) error {
	_, err := withEthtool(func(et *ethtool.Ethtool) (struct{}, error) {
		return struct{}{}, et.Change(ifname, map[string]bool{feature: on})
	})
	return err
}

// nicErr explains ethtool errors a user meets on virtual hardware.
func nicErr(ifname, what string, err error) error {
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%s: driver does not support %s (%v)", ifname, what, err)
	}
	return fmt.Errorf("%s: %s: %w", ifname, what, err)
}

type netIf struct {
	Name     string
	Physical bool // has a device behind it (/sys/class/net/X/device)
}

// interfaces lists interfaces from /sys/class/net. sysfs shows the
// namespace it was mounted in, so this is the host's view.
func interfaces(e *Env) ([]netIf, error) {
	dir := e.sys("class/net")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, explain(err)
	}
	var out []netIf
	for _, d := range ents {
		if d.Name() == "lo" || d.Name() == "bonding_masters" {
			continue
		}
		_, derr := os.Stat(filepath.Join(dir, d.Name(), "device"))
		out = append(out, netIf{Name: d.Name(), Physical: derr == nil})
	}
	return out, nil
}

func physical(i netIf) bool { return i.Physical }

// perNIC gathers what read reports for each interface in /sys/class/net
// that keep accepts, in order; none is the error when nothing was reported.
func perNIC(e *Env, keep func(netIf) bool, none string, read func(netIf) []Current) ([]Current, error) {
	ifs, err := interfaces(e)
	if err != nil {
		return nil, err
	}
	var out []Current
	for _, i := range ifs {
		if keep(i) {
			out = append(out, read(i)...)
		}
	}
	if len(out) == 0 {
		return nil, errors.New(none)
	}
	return out, nil
}

func init() {
	register(irqbalanceKnob(), irqAffinityKnob(), ringKnob(), offloadKnob())
}

func ringKnob() *Knob {
	max := both("max", srcKubeOVNRing, srcKubeOVNRing)
	return &Knob{
		ID: "nic.rings", Title: "NIC RX/TX ring sizes against their maximum", Family: "nic", Scope: ScopeNIC,
		Access: "ethtool ring parameters (SIOCETHTOOL ETHTOOL_GRINGPARAM/SRINGPARAM) for each NIC in /sys/class/net/*/device",
		Risk:   "larger rings hold more packets: more memory, more bufferbloat latency under load; the link resets briefly",
		Recs:   max,
		Read: func(e *Env) ([]Current, error) {
			return perNIC(e, physical, "no NIC with a device in /sys/class/net (only virtual interfaces)", func(i netIf) []Current {
				r, err := e.nic().Ring(i.Name)
				if err != nil {
					return []Current{{Target: i.Name, Err: nicErr(i.Name, "ring parameters (ethtool -g)", err)}}
				}
				if r.RXMax == 0 && r.TXMax == 0 {
					return []Current{{Target: i.Name, Err: fmt.Errorf("%s: driver reports no ring maximum", i.Name)}}
				}
				raw := fmt.Sprintf("rx=%d tx=%d", r.RX, r.TX)
				return []Current{{Target: i.Name, Raw: raw, hint: fmt.Sprintf("rx=%d tx=%d", r.RXMax, r.TXMax),
					Value: fmt.Sprintf("%s (max rx=%d tx=%d)", raw, r.RXMax, r.TXMax)}}
			})
		},
		Judge: func(_ *Env, c Current, _ string) (Status, string, string) {
			if c.Raw == c.hint {
				return StatusOK, "", "at maximum"
			}
			return StatusDiffers, c.hint, "below maximum"
		},
		Write: func(e *Env, target, v string, _ bool) error {
			var rx, tx uint32
			if _, err := fmt.Sscanf(v, "rx=%d tx=%d", &rx, &tx); err != nil {
				return fmt.Errorf("ring value %q: want rx=N tx=M", v)
			}
			if err := e.nic().SetRing(target, rx, tx); err != nil {
				return nicErr(target, "setting rings (ethtool -G)", err)
			}
			return nil
		},
	}
}

// offloads maps a short name to the kernel feature strings that carry it, in
// order of preference (NICs name their TX checksum feature differently).
var offloads = []struct {
	Short string
	Names []string
}{
	{"tso", []string{"tx-tcp-segmentation"}},
	{"gso", []string{"tx-generic-segmentation"}},
	{"gro", []string{"rx-gro"}},
	{"rx-checksum", []string{"rx-checksum"}},
	{"tx-checksum", []string{"tx-checksum-ip-generic", "tx-checksum-ipv4"}},
}

func offloadKnob() *Knob {
	return &Knob{
		ID: "nic.offloads", Title: "Segmentation, receive and checksum offloads (TSO/GSO/GRO/checksum) on NICs and veths",
		Family: "nic", Scope: ScopeNIC,
		Access: "ethtool features (SIOCETHTOOL ETHTOOL_GFEATURES/SFEATURES) for NICs and veths in /sys/class/net",
		Risk:   "GRO batches packets: fewer CPU cycles per byte, slightly more latency per packet",
		Recs:   map[Profile]Rec{Throughput: {"on", srcKubeOVNSTT}},
		Source: srcKubeOVNSTT,
		Read: func(e *Env) ([]Current, error) {
			// Bridges, tunnels, dummies: not what the documents tune.
			nicOrVeth := func(i netIf) bool {
				if i.Physical {
					return true
				}
				drv, err := e.nic().Driver(i.Name)
				return err == nil && drv == "veth"
			}
			return perNIC(e, nicOrVeth, "no NIC or veth in /sys/class/net", func(i netIf) []Current {
				fs, err := e.nic().Features(i.Name)
				if err != nil {
					return []Current{{Target: i.Name, Err: nicErr(i.Name, "features (ethtool -k)", err)}}
				}
				var out []Current
				for _, o := range offloads {
					t := i.Name + "/" + o.Short
					f, name, ok := pickFeature(fs, o.Names)
					if !ok {
						out = append(out, Current{Target: t, Err: fmt.Errorf("%s: driver has no %s feature", i.Name, strings.Join(o.Names, "/"))})
						continue
					}
					v := onOff(f.Active)
					c := Current{Target: t, Value: v, Raw: v, hint: name}
					if f.Fixed {
						c.Value += " [fixed]"
					}
					out = append(out, c)
				}
				return out
			})
		},
		Judge: func(_ *Env, c Current, rec string) (Status, string, string) {
			if c.Raw == rec {
				return StatusOK, "", ""
			}
			if strings.HasSuffix(c.Value, "[fixed]") {
				return StatusDiffers, "", "fixed by the driver"
			}
			return StatusDiffers, rec, ""
		},
		Write: func(e *Env, target, v string, _ bool) error {
			ifname, short, ok := strings.Cut(target, "/")
			if !ok {
				return fmt.Errorf("bad offload target %q", target)
			}
			fs, err := e.nic().Features(ifname)
			if err != nil {
				return nicErr(ifname, "features", err)
			}
			for _, o := range offloads {
				if o.Short == short {
					if _, name, ok := pickFeature(fs, o.Names); ok {
						if err := e.nic().SetFeature(ifname, name, v == "on"); err != nil {
							return nicErr(ifname, "setting "+name, err)
						}
						return nil
					}
				}
			}
			return fmt.Errorf("%s: no feature for %q", ifname, short)
		},
	}
}

func pickFeature(fs map[string]Feature, names []string) (Feature, string, bool) {
	for _, n := range names {
		if f, ok := fs[n]; ok {
			return f, n, true
		}
	}
	return Feature{}, "", false
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// irqbalanceKnob scans /proc for an irqbalance process. cnibench does not
// stop services: it says how.
func irqbalanceKnob() *Knob {
	rec := both("not running", srcKubeOVNIRQ, srcKubeOVNIRQ)
	return &Knob{
		ID: "irq.irqbalance", Title: "irqbalance daemon (moves IRQs between CPUs)", Family: "irq", Scope: ScopeHost,
		Access: "/proc/*/comm (process scan)", Risk: "without it, unpinned IRQs may pile onto one CPU",
		AuditOnly: true, Why: "stop it with `systemctl disable --now irqbalance`: it would undo NIC IRQ pinning",
		Recs: rec,
		Read: func(e *Env) ([]Current, error) {
			ents, err := os.ReadDir(e.ProcRoot)
			if err != nil {
				return nil, explain(err)
			}
			var pids []string
			for _, d := range ents {
				if _, err := strconv.Atoi(d.Name()); err != nil {
					continue
				}
				b, err := os.ReadFile(e.proc(d.Name(), "comm"))
				if err == nil && strings.TrimSpace(string(b)) == "irqbalance" {
					pids = append(pids, d.Name())
				}
			}
			v := "not running"
			if len(pids) > 0 {
				v = "running (pid " + strings.Join(pids, ",") + ")"
			}
			return []Current{{Value: v, Raw: v}}, nil
		},
		Judge: func(_ *Env, c Current, rec string) (Status, string, string) {
			if c.Value == rec {
				return StatusOK, "", ""
			}
			return StatusDiffers, "", "stop it with `systemctl disable --now irqbalance`"
		},
	}
}

// nicIRQs finds the MSI IRQs of a NIC: the PCI function's msi_irqs, which
// for virtio-net sits one level above the virtioN device.
func nicIRQs(e *Env, ifname string) ([]int, error) {
	dev := e.sys("class/net", ifname, "device")
	// device is a symlink into /sys/devices; ".." must be taken on the
	// resolved path, not lexically.
	real, err := filepath.EvalSymlinks(dev)
	if err != nil {
		real = dev
	}
	for _, d := range []string{filepath.Join(real, "msi_irqs"), filepath.Join(filepath.Dir(real), "msi_irqs")} {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		var irqs []int
		for _, x := range ents {
			if n, err := strconv.Atoi(x.Name()); err == nil {
				irqs = append(irqs, n)
			}
		}
		sort.Ints(irqs)
		if len(irqs) > 0 {
			return irqs, nil
		}
	}
	return nil, fmt.Errorf("%s: no MSI IRQs under %s (legacy INTx or not PCI)", ifname, dev)
}

// irqAffinityKnob pins each NIC IRQ to one CPU, round-robin, as 000's
// "Interrupt Binding" asks. The journal keeps smp_affinity (hex mask) as read.
func irqAffinityKnob() *Knob {
	rec := both("one CPU per IRQ", srcKubeOVNIRQ, srcKubeOVNIRQ)
	return &Knob{
		ID: "irq.nic_affinity", Title: "NIC IRQs pinned to single CPUs", Family: "irq", Scope: ScopeNIC,
		Access: "/proc/irq/<n>/smp_affinity for the IRQs in /sys/class/net/<nic>/device/msi_irqs",
		Risk:   "a busy queue cannot spread; irqbalance, if running, moves them back",
		Recs:   rec,
		Read: func(e *Env) ([]Current, error) {
			cl, err := cpus(e)
			if err != nil {
				return nil, err
			}
			ncpu := len(cl)
			if ncpu == 0 {
				return nil, errors.New("no CPUs listed under /sys/devices/system/cpu")
			}
			return perNIC(e, physical, "no NIC with a device in /sys/class/net", func(i netIf) []Current {
				irqs, err := nicIRQs(e, i.Name)
				if err != nil {
					return []Current{{Target: i.Name, Err: err}}
				}
				var out []Current
				for n, irq := range irqs {
					t := fmt.Sprintf("%s/irq%d", i.Name, irq)
					mask, err := readFile(e.proc("irq", strconv.Itoa(irq), "smp_affinity"))
					if err != nil {
						out = append(out, Current{Target: t, Err: err})
						continue
					}
					list, err := readFile(e.proc("irq", strconv.Itoa(irq), "smp_affinity_list"))
					if err != nil {
						out = append(out, Current{Target: t, Err: err})
						continue
					}
					out = append(out, Current{Target: t, Value: "cpus " + norm(list) + " (mask " + norm(mask) + ")", Raw: mask,
						hint: cpuMask(n % ncpu)})
				}
				return out
			})
		},
		Judge: func(_ *Env, c Current, _ string) (Status, string, string) {
			list, _, _ := strings.Cut(strings.TrimPrefix(c.Value, "cpus "), " ")
			if !strings.ContainsAny(list, ",-") {
				return StatusOK, "", "pinned"
			}
			return StatusDiffers, c.hint, "may run on cpus " + list
		},
		Write: func(e *Env, target, v string, _ bool) error {
			_, irq, ok := strings.Cut(target, "/irq")
			if _, err := strconv.Atoi(irq); !ok || err != nil {
				return fmt.Errorf("bad irq target %q", target)
			}
			return writeFile(e.proc("irq", irq, "smp_affinity"), v)
		},
	}
}

// cpuMask is the smp_affinity hex mask of one CPU, in the kernel's
// comma-separated 32-bit groups.
func cpuMask(cpu int) string {
	groups := make([]string, cpu/32+1)
	for i := range groups {
		groups[i] = "00000000"
	}
	groups[len(groups)-1-cpu/32] = fmt.Sprintf("%08x", uint32(1)<<(cpu%32))
	return strings.Join(groups, ",")
}

// offloadGroups maps `ethtool -K` short names to the kernel feature strings
// each stands for (ethtool's off_flag_def table), so lab knobs and tune
// share one ethtool path: the ioctl, never the ethtool binary.
var offloadGroups = map[string][]string{
	"rx":  {"rx-checksum"},
	"tx":  {"tx-checksum-ipv4", "tx-checksum-ip-generic", "tx-checksum-ipv6", "tx-checksum-fcoe-crc", "tx-checksum-sctp"},
	"sg":  {"tx-scatter-gather", "tx-scatter-gather-fraglist"},
	"tso": {"tx-tcp-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation"},
	"gso": {"tx-generic-segmentation"},
	"gro": {"rx-gro"},
	"lro": {"rx-lro"},
}

// OffloadNames lists the short offload names Journal.SetOffloads takes.
func OffloadNames() []string {
	out := slices.Sorted(maps.Keys(offloadGroups))
	return out
}

// formatFeatures writes features as "name=on name=off", sorted.
func formatFeatures(m map[string]bool) string {
	out := make([]string, 0, len(m))
	for f, on := range m {
		out = append(out, f+"="+onOff(on))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func parseFeatures(s string) (map[string]bool, error) {
	m := map[string]bool{}
	for _, kv := range strings.Fields(s) {
		f, v, ok := strings.Cut(kv, "=")
		if !ok || (v != "on" && v != "off") {
			return nil, fmt.Errorf("offload state %q in the journal: want name=on|off", kv)
		}
		m[f] = v == "on"
	}
	return m, nil
}

// featureSetter is a NICTool that changes several features in one call, as
// `ethtool -K` does, so the kernel resolves their dependencies once.
type featureSetter interface {
	SetFeatures(ifname string, set map[string]bool) error
}

func setFeatures(n NICTool, ifname string, set map[string]bool) error {
	if fs, ok := n.(featureSetter); ok {
		return fs.SetFeatures(ifname, set)
	}
	names := slices.Sorted(maps.Keys(set))
	for _, f := range names {
		if err := n.SetFeature(ifname, f, set[f]); err != nil {
			return err
		}
	}
	return nil
}
