package fastpath

// The object and its Go bindings are committed, so building cnibench needs
// no clang. Regenerate after changing bpf/fastpath.c (Debian: clang-14,
// libbpf-dev):
//
//	go generate ./pkg/fastpath
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-14 -target bpfel -type endpoint -type tunnel -type lpm_v4 fastpath bpf/fastpath.c -- -I/usr/include/x86_64-linux-gnu -O2 -g -Wall
