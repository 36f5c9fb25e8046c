package offload

import (
	"encoding/binary"
	"math/bits"
)

// The Internet checksum, written here rather than taken from a library:
// it runs over every byte of every segment the splitter makes and every
// packet the coalescer merges, so it is on the hot path. It adds 64-bit
// big-endian words with carry; since 2^16 ≡ 1 modulo 2^16-1, folding the
// 64-bit one's-complement sum gives the 16-bit one.

// sum adds b to the unfolded one's-complement sum acc. b must start at an
// even offset of the checksummed data.
//
// Runs of 32 bytes go into four independent accumulators of 32-bit
// little-endian words: no carry chain ties one add to the last, so the
// loads and adds of a run overlap (about 1.5x the 64-bit add-with-carry
// chain on an MTU-sized packet, BenchmarkChecksum), and no byte swap per
// load. The one's-complement sum does not depend on byte order (RFC
// 1071): folded to 16 bits and swapped, it joins the big-endian sum of the
// rest. Each accumulator takes at most 2^14 words of a 64 KiB packet, far
// from overflowing.
func sum(b []byte, acc uint64) uint64 {
	var c uint64
	if len(b) >= 64 {
		var a0, a1, a2, a3 uint64
		for len(b) >= 32 {
			a0 += uint64(binary.LittleEndian.Uint32(b)) + uint64(binary.LittleEndian.Uint32(b[16:]))
			a1 += uint64(binary.LittleEndian.Uint32(b[4:])) + uint64(binary.LittleEndian.Uint32(b[20:]))
			a2 += uint64(binary.LittleEndian.Uint32(b[8:])) + uint64(binary.LittleEndian.Uint32(b[24:]))
			a3 += uint64(binary.LittleEndian.Uint32(b[12:])) + uint64(binary.LittleEndian.Uint32(b[28:]))
			b = b[32:]
		}
		le := fold(a0 + a1 + a2 + a3)
		acc, c = bits.Add64(acc, uint64(bits.ReverseBytes16(le)), 0)
	}
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		acc, c = bits.Add64(acc, uint64(binary.BigEndian.Uint32(b)), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		acc, c = bits.Add64(acc, uint64(binary.BigEndian.Uint16(b)), c)
		b = b[2:]
	}
	if len(b) == 1 {
		acc, c = bits.Add64(acc, uint64(b[0])<<8, c)
	}
	acc, c = bits.Add64(acc, c, 0)
	return acc + c
}

// fold reduces an unfolded sum to 16 bits (not inverted).
func fold(acc uint64) uint16 {
	acc = (acc >> 32) + (acc & 0xffffffff)
	acc = (acc >> 32) + (acc & 0xffffffff)
	acc = (acc >> 16) + (acc & 0xffff)
	acc = (acc >> 16) + (acc & 0xffff)
	acc = (acc >> 16) + (acc & 0xffff)
	return uint16(acc)
}

// Checksum is the Internet checksum of b (RFC 1071): inverted, ready to
// store.
func Checksum(b []byte) uint16 { return ^fold(sum(b, 0)) }

// pseudoSum is the unfolded sum of the TCP/UDP pseudo-header: source and
// destination from the IP header ip, protocol and transport length.
func pseudoSum(ip []byte, v6 bool, proto uint8, length int) uint64 {
	if v6 {
		return sum(ip[8:40], uint64(proto)+uint64(length))
	}
	return sum(ip[12:20], uint64(proto)+uint64(length))
}

// transportValid reports whether the TCP or UDP checksum of a packet whose
// transport header starts at off verifies.
func transportValid(pkt []byte, v6 bool, proto uint8, off int) bool {
	return fold(sum(pkt[off:], pseudoSum(pkt, v6, proto, len(pkt)-off))) == 0xffff
}

// Update is the stored Internet checksum c after the checksummed bytes
// old became new: the incremental update of RFC 1624 (eqn. 3), so a
// field rewritten in a forwarded packet costs its own words, not the
// packet's. old and new are the same span, starting at an even offset of
// the checksummed data.
func Update(c uint16, old, new []byte) uint16 {
	return ^fold(uint64(^c) + uint64(^fold(sum(old, 0))) + sum(new, 0))
}
