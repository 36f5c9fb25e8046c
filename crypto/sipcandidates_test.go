package crypto

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/dchest/siphash"
)

// sipGeneric is SipHash-c-d in plain Go, written only as a benchmark
// candidate (like the seed's mac_candidates): the wire uses SipHash-2-4
// through dchest/siphash. Seed 000 measured SipHash-1-3 at ~0.55× the cost
// of 2-4 at 1415 bytes; this lets us measure the same trade here, with both
// round counts in the same implementation for a fair ratio.
func sipGeneric(c, d int, k0, k1 uint64, p []byte) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(p)
	for len(p) >= 8 {
		m := binary.LittleEndian.Uint64(p)
		v3 ^= m
		for range c {
			round()
		}
		v0 ^= m
		p = p[8:]
	}
	var last [8]byte
	copy(last[:], p)
	last[7] = byte(n)
	m := binary.LittleEndian.Uint64(last[:])
	v3 ^= m
	for range c {
		round()
	}
	v0 ^= m
	v2 ^= 0xff
	for range d {
		round()
	}
	return v0 ^ v1 ^ v2 ^ v3
}

// The candidate is only worth measuring if it is SipHash: with 2-4 rounds
// it must agree with the library on every length.
func TestSipGenericMatchesLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	buf := make([]byte, 300)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := range buf {
		k0, k1 := rng.Uint64(), rng.Uint64()
		if sipGeneric(2, 4, k0, k1, buf[:n]) != siphash.Hash(k0, k1, buf[:n]) {
			t.Fatalf("generic SipHash-2-4 differs from the library at %d bytes", n)
		}
	}
}

func BenchmarkMAC(b *testing.B) {
	for _, n := range []int{63, 1415} {
		p := make([]byte, n)
		var sink uint64
		b.Run(sizeName("siphash24-lib", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sink ^= siphash.Hash(1, 2, p)
			}
		})
		b.Run(sizeName("siphash24-go", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sink ^= sipGeneric(2, 4, 1, 2, p)
			}
		})
		b.Run(sizeName("siphash13-go", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sink ^= sipGeneric(1, 3, 1, 2, p)
			}
		})
		_ = sink
	}
}
