package datapath

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Flannel is how flanneld runs its node's pod network.
type Flannel struct {
	// Backend is the net-conf's Backend.Type (vxlan, host-gw, wireguard,
	// …), lower case; without the net-conf, vxlan when flannel.1 exists.
	Backend string `json:"backend,omitempty"`
	Network string `json:"network,omitempty"` // the cluster's pod network
	Subnet  string `json:"subnet,omitempty"`  // this node's
	MTU     int    `json:"mtu,omitempty"`     // the pods' MTU flanneld chose
	// IPMasq and Iface are flanneld's --ip-masq and --iface flags, as given.
	IPMasq string `json:"ip_masq,omitempty"`
	Iface  string `json:"iface,omitempty"`
}

// ParseFlannelNetConf reads flanneld's network configuration
// (net-conf.json: {"Network": "10.244.0.0/16", "Backend": {"Type": "vxlan"}}).
func ParseFlannelNetConf(b []byte) (Flannel, error) {
	var nc struct {
		Network string
		Backend struct{ Type string }
	}
	if err := json.Unmarshal(b, &nc); err != nil {
		return Flannel{}, fmt.Errorf("%w: flannel net-conf: %v", ErrMalformed, err)
	}
	if nc.Backend.Type == "" {
		// flanneld's own default backend.
		nc.Backend.Type = "udp"
	}
	return Flannel{Network: nc.Network, Backend: strings.ToLower(nc.Backend.Type)}, nil
}

// ParseFlannelSubnetEnv reads the subnet file flanneld writes for the CNI
// plugin (FLANNEL_NETWORK=…, FLANNEL_SUBNET=…, FLANNEL_MTU=…,
// FLANNEL_IPMASQ=…) into f.
func ParseFlannelSubnetEnv(b []byte, f *Flannel) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			return fmt.Errorf("%w: flannel subnet file line %d: want KEY=VALUE, got %q", ErrMalformed, line, t)
		}
		switch k {
		case "FLANNEL_NETWORK":
			if f.Network == "" {
				f.Network = v
			}
		case "FLANNEL_SUBNET":
			f.Subnet = v
		case "FLANNEL_MTU":
			mtu, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%w: flannel subnet file line %d: FLANNEL_MTU %q: %v", ErrMalformed, line, v, err)
			}
			f.MTU = mtu
		case "FLANNEL_IPMASQ":
			if f.IPMasq == "" {
				f.IPMasq = v
			}
		}
	}
	return sc.Err()
}

// ReadFlannel reads flanneld's net-conf and subnet file as the process sees
// them (root is /proc/<pid>/root: root with CAP_SYS_PTRACE), at the paths
// its flags name or flanneld's defaults.
func ReadFlannel(root string, args []string) (*Flannel, error) {
	conf := FlagValue(args, "net-config-path")
	if conf == "" {
		conf = "/etc/kube-flannel/net-conf.json"
	}
	b, err := os.ReadFile(filepath.Join(root, conf))
	if err != nil {
		return nil, fmt.Errorf("flanneld's net-conf: %w", err)
	}
	f, err := ParseFlannelNetConf(b)
	if err != nil {
		return nil, err
	}
	sub := FlagValue(args, "subnet-file")
	if sub == "" {
		sub = "/run/flannel/subnet.env"
	}
	if b, err := os.ReadFile(filepath.Join(root, sub)); err == nil {
		if err := ParseFlannelSubnetEnv(b, &f); err != nil {
			return nil, err
		}
	}
	return &f, nil
}
