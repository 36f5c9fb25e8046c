package shard

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// PeerID names a peer inside the data plane (the control core assigns them).
type PeerID uint32

// NoPeer is what a lookup returns when no prefix matches.
const NoPeer PeerID = 0

// Table maps inner destination prefixes to peers (longest prefix wins). It
// is immutable once built: the router builds a new one and swaps it in
// atomically, so shards read it without locks.
//
// Lookup probes one hash map per prefix length in use, longest first. A
// gateway's AllowedIPs use few distinct lengths (a /24 per site, a /32 or
// /128 per host, maybe a default route), so that is a handful of map probes
// that allocate nothing; a trie would win only with many lengths.
type Table struct {
	v4    map[uint64]PeerID // key: masked address << 8 | length
	v6    map[v6key]PeerID
	lens4 []int // descending
	lens6 []int
}

// Route is one prefix → peer entry.
type Route struct {
	Prefix netip.Prefix
	Peer   PeerID
}

type v6key struct {
	addr [16]byte
	bits int
}

// NewTable builds a table. Later duplicates of a prefix replace earlier
// ones; the configuration refuses a prefix listed twice before it gets
// here (nested prefixes are fine: the longest wins).
func NewTable(routes []Route) *Table {
	t := &Table{v4: map[uint64]PeerID{}, v6: map[v6key]PeerID{}}
	seen4, seen6 := map[int]bool{}, map[int]bool{}
	for _, r := range routes {
		p := r.Prefix.Masked()
		if p.Addr().Is4() {
			t.v4[key4(p.Addr(), p.Bits())] = r.Peer
			if !seen4[p.Bits()] {
				seen4[p.Bits()] = true
				t.lens4 = append(t.lens4, p.Bits())
			}
		} else {
			t.v6[v6key{p.Addr().As16(), p.Bits()}] = r.Peer
			if !seen6[p.Bits()] {
				seen6[p.Bits()] = true
				t.lens6 = append(t.lens6, p.Bits())
			}
		}
	}
	slices.SortFunc(t.lens4, func(a, b int) int { return b - a })
	slices.SortFunc(t.lens6, func(a, b int) int { return b - a })
	return t
}

func key4(a netip.Addr, bits int) uint64 {
	b := a.As4()
	v := binary.BigEndian.Uint32(b[:])
	if bits < 32 {
		v &^= (1<<(32-bits) - 1)
	}
	return uint64(v)<<8 | uint64(bits)
}

// Lookup4 finds the peer for an IPv4 address given as its 4 bytes.
func (t *Table) Lookup4(ip [4]byte) PeerID {
	v := binary.BigEndian.Uint32(ip[:])
	for _, l := range t.lens4 {
		m := v
		if l < 32 {
			m &^= (1<<(32-l) - 1)
		}
		if p, ok := t.v4[uint64(m)<<8|uint64(l)]; ok {
			return p
		}
	}
	return NoPeer
}

// Lookup6 finds the peer for an IPv6 address.
func (t *Table) Lookup6(ip [16]byte) PeerID {
	for _, l := range t.lens6 {
		k := v6key{ip, l}
		for i := l / 8; i < 16; i++ {
			if i == l/8 && l%8 != 0 {
				k.addr[i] &= ^byte(0xff >> (l % 8))
			} else {
				k.addr[i] = 0
			}
		}
		if p, ok := t.v6[k]; ok {
			return p
		}
	}
	return NoPeer
}

// LookupPacket returns the peer for an inner IP packet's destination
// (src=false) or source (src=true) address, or NoPeer for anything that is
// not a well-formed IPv4/IPv6 header.
func (t *Table) LookupPacket(pkt []byte, src bool) PeerID {
	if len(pkt) < 1 {
		return NoPeer
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return NoPeer
		}
		off := 16
		if src {
			off = 12
		}
		return t.Lookup4([4]byte(pkt[off : off+4]))
	case 6:
		if len(pkt) < 40 {
			return NoPeer
		}
		off := 24
		if src {
			off = 8
		}
		return t.Lookup6([16]byte(pkt[off : off+16]))
	}
	return NoPeer
}
