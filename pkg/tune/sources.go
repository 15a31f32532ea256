package tune

// Where recommendations come from. Seed documents are named by their file
// prefix in /work/shared/seeds (000 Kube-OVN, 002 OVS userspace UDP, 003
// OVN-K8s DPDK, 004 Cilium) and their section; tuned profiles by name.
const (
	srcKubeOVNCPU   = "000 Kube-OVN tuning § CPU Performance Mode Tuning"
	srcKubeOVNRing  = "000 Kube-OVN tuning § NIC Hardware Queue Adjustment"
	srcKubeOVNIRQ   = "000 Kube-OVN tuning § Interrupt Binding"
	srcKubeOVNOVS   = "000 Kube-OVN tuning § OVS Kernel Module Optimization"
	srcKubeOVNSTT   = "000 Kube-OVN tuning § Using STT Type Tunnel (TCP offloads)"
	srcKubeOVNLB    = "000 Kube-OVN tuning § Disable OVN LB / FastPath (netfilter cost)"
	srcOVSUDP       = "002 OVS userspace UDP tuning § Tunning Steps"
	srcDPDK         = "003 OVN-K8s DPDK datapaths (benchmarks: PMD pinning, load-based sleeping, userspace TSO)"
	srcTunedNetLat  = "tuned network-latency"
	srcTunedLatPerf = "tuned latency-performance (included by network-latency)"
	srcTunedNetThr  = "tuned network-throughput"
	srcTunedThrPerf = "tuned throughput-performance (included by network-throughput)"
	srcCiliumBBR    = "Cilium Tuning Guide § Bandwidth Manager / BBR (docs.cilium.io)"
	srcKernelDoc    = "kernel Documentation/networking/ip-sysctl.rst (no seed or tuned profile gives a value)"
	srcCilium004    = "004 Cilium tuning § Tunnel Modes (encapsulation overhead)"
)
