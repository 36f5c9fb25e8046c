// Package shard is one data-plane worker per core: a pinned loop over its
// own UDP socket(s), its own TUN queue and its rings, running each packet to
// completion with batched syscalls, TUN superpackets split and coalesced
// (shard/offload) and UDP GSO/GRO (docs/ARCHITECTURE.md).
package shard
