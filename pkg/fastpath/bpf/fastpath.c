// SPDX-License-Identifier: GPL-2.0
//
// cnibench's eBPF host routing: the datapath Cilium calls "BPF host
// routing", reduced to what a lab node needs. Two tc ingress programs:
//
//   from_pod     on every pod's node-side veth (packets the pod sends):
//                a local pod  -> bpf_redirect_peer straight into its netns;
//                a remote pod over a tunnel -> tunnel key + bpf_redirect
//                into the node's collect-metadata VXLAN device;
//                anything else routable -> bpf_fib_lookup + bpf_redirect
//                (or bpf_redirect_neigh while the next hop is unresolved)
//                out of the underlay.
//   from_netdev  on the underlay (native routing) or the VXLAN device
//                (after decapsulation): a local pod -> bpf_redirect_peer.
//
// On an L2 segment (the two-node bridge preset) the same programs skip the
// bridge instead of the router: a frame for a pod of this node goes
// straight into it, one for a pod of the other node straight out of the
// node's uplink port, unchanged (no MAC rewrite, no TTL decrement).
//
// Either way the packet never enters the node's IP stack: no netfilter
// hook, no conntrack, no routing decision, no qdisc on the node-side veth.
// What the programs do not handle (ARP, IPv6, IP options, fragments, TTL
// about to expire) takes the kernel's path unchanged (TC_ACT_OK).
//
// Generated into Go by bpf2go (see gen.go); the object is committed so a
// plain `go build` needs no clang.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef AF_INET
#define AF_INET 2
#endif

// A pod: on this node, its node-side veth and its eth0's MAC; on the other
// node of an L2 segment (EP_REMOTE), the uplink port that reaches it.
struct endpoint {
	__u32 ifindex; // node-side veth (bpf_redirect_peer) or uplink (EP_REMOTE)
	__u8 mac[6];   // the pod's eth0
	__u8 flags;    // EP_*
	__u8 pad;
};

#define EP_REMOTE 1 // another node's pod on this L2 segment: out of the uplink as is
#define EP_L2 2     // same L2 segment: the frame is already addressed to the pod

// A remote pod CIDR reached through a tunnel.
struct tunnel {
	__u32 remote;  // the other node's underlay address (network order)
	__u32 vni;
	__u32 ifindex; // this node's collect-metadata VXLAN device
};

struct lpm_v4 {
	__u32 prefixlen;
	__u32 addr; // network order
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); // pod IPv4, network order
	__type(value, struct endpoint);
} endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 256);
	__type(key, struct lpm_v4);
	__type(value, struct tunnel);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} tunnels SEC(".maps");

// What the programs did, per CPU: the evidence that traffic took the fast
// path (read by the lab and its tests).
enum {
	STAT_PEER = 0,  // redirected into a local pod
	STAT_FIB = 1,   // routed out of the underlay, next hop resolved
	STAT_NEIGH = 2, // routed out of the underlay, next hop left to the kernel
	STAT_TUNNEL = 3, // sent into the VXLAN device with a tunnel key
	STAT_PASS = 4,  // left to the kernel's path
	STAT_L2 = 5,    // sent out of the uplink unchanged (L2 segment)
	STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

// The node-side veths' MAC (Calico's ee:ee:ee:ee:ee:ee), the source MAC a
// pod sees on what it receives.
volatile const __u8 gw_mac[6] = {0xee, 0xee, 0xee, 0xee, 0xee, 0xee};

static __always_inline void count(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &i);
	if (v)
		(*v)++;
}

static __always_inline int pass(void)
{
	count(STAT_PASS);
	return TC_ACT_OK;
}

// ip_decrease_ttl: TTL - 1 with the header checksum updated incrementally
// (RFC 1624), as the kernel's forwarding does.
static __always_inline void dec_ttl(struct iphdr *ip)
{
	__u32 check = ip->check;
	check += bpf_htons(0x0100);
	ip->check = (__u16)(check + (check >= 0xFFFF));
	ip->ttl--;
}

// parse returns the IPv4 header of a packet the fast path may forward, or
// NULL for one the kernel must see (not IPv4, options, TTL about to expire).
static __always_inline struct iphdr *parse(struct __sk_buff *skb, struct ethhdr **eth)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *e = data;
	struct iphdr *ip = data + sizeof(*e);

	if ((void *)(ip + 1) > end)
		return NULL;
	if (e->h_proto != bpf_htons(ETH_P_IP))
		return NULL;
	if (ip->ihl != 5 || ip->ttl <= 1)
		return NULL;
	*eth = e;
	return ip;
}

// to_local delivers into a pod of this node: MACs as the node's routing
// would have written them, then straight into the pod's namespace.
static __always_inline int to_local(struct __sk_buff *skb, struct ethhdr *eth, struct iphdr *ip,
				    struct endpoint *ep)
{
	if (!(ep->flags & EP_L2)) {
		__builtin_memcpy(eth->h_dest, ep->mac, 6);
		__builtin_memcpy(eth->h_source, (const void *)gw_mac, 6);
		dec_ttl(ip);
	}
	// A frame decapsulated by the VXLAN device was classified against that
	// device's MAC; in the pod it is addressed to the pod.
	bpf_skb_change_type(skb, PACKET_HOST);
	count(STAT_PEER);
	return bpf_redirect_peer(ep->ifindex, 0);
}

// The two hooks. Both deliver straight into a local pod; only what a pod
// sends may also go out directly (another node's pod, a tunnel, a route).
enum hook {
	FROM_POD,
	FROM_NETDEV,
};

// forward is both programs: called with a constant hook and inlined, each
// program keeps only its own branches.
static __always_inline int forward(struct __sk_buff *skb, enum hook from)
{
	struct ethhdr *eth;
	struct iphdr *ip = parse(skb, &eth);
	if (!ip)
		return pass();

	__u32 daddr = ip->daddr;
	struct endpoint *ep = bpf_map_lookup_elem(&endpoints, &daddr);
	if (ep && !(ep->flags & EP_REMOTE))
		return to_local(skb, eth, ip, ep);
	if (from == FROM_NETDEV)
		return pass();
	if (ep) {
		if (eth->h_dest[0] & 1)
			return pass(); // not unicast: the bridge floods it
		count(STAT_L2);
		return bpf_redirect(ep->ifindex, 0);
	}

	struct lpm_v4 key = {.prefixlen = 32, .addr = daddr};
	struct tunnel *t = bpf_map_lookup_elem(&tunnels, &key);
	if (t) {
		struct bpf_tunnel_key tk = {};
		tk.remote_ipv4 = bpf_ntohl(t->remote);
		tk.tunnel_id = t->vni;
		tk.tunnel_ttl = 64;
		dec_ttl(ip);
		if (bpf_skb_set_tunnel_key(skb, &tk, sizeof(tk), BPF_F_ZERO_CSUM_TX) < 0)
			return TC_ACT_SHOT;
		count(STAT_TUNNEL);
		return bpf_redirect(t->ifindex, 0);
	}

	// Native routing. tot_len stays 0: with the packet's length a GSO
	// packet larger than the MTU gets BPF_FIB_LKUP_RET_FRAG_NEEDED and bulk
	// data would silently take the slow path.
	struct bpf_fib_lookup fib = {};
	fib.family = AF_INET;
	fib.tos = ip->tos;
	fib.l4_protocol = ip->protocol;
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = daddr;
	fib.ifindex = skb->ingress_ifindex;

	long rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	switch (rc) {
	case BPF_FIB_LKUP_RET_SUCCESS:
		dec_ttl(ip);
		__builtin_memcpy(eth->h_dest, fib.dmac, 6);
		__builtin_memcpy(eth->h_source, fib.smac, 6);
		count(STAT_FIB);
		return bpf_redirect(fib.ifindex, 0);
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		dec_ttl(ip);
		count(STAT_NEIGH);
		return bpf_redirect_neigh(fib.ifindex, NULL, 0, 0);
	}
	return pass();
}

SEC("tc")
int from_pod(struct __sk_buff *skb)
{
	return forward(skb, FROM_POD);
}

SEC("tc")
int from_netdev(struct __sk_buff *skb)
{
	return forward(skb, FROM_NETDEV);
}

char __license[] SEC("license") = "GPL";
