package offload

import (
	"math/rand/v2"
	"testing"
)

// refChecksum is RFC 1071 the slow way: 16-bit words, fold at the end.
func refChecksum(b []byte) uint16 { return ^refFold(b, 0) }

// refFold is the folded one's-complement sum of an unfolded initial sum
// acc and b's 16-bit words, the slow way.
func refFold(b []byte, acc uint64) uint16 {
	s := acc>>48 + acc>>32&0xffff + acc>>16&0xffff + acc&0xffff
	for i := 0; i+1 < len(b); i += 2 {
		s += uint64(b[i])<<8 | uint64(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint64(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func TestChecksumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 3000 {
		if n > 200 && n%13 != 0 {
			continue
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if got, want := Checksum(b), refChecksum(b); got != want {
			t.Fatalf("len %d: %#04x, reference %#04x", n, got, want)
		}
	}
	// Any unfolded initial sum (a pseudo-header's, up to 2^64-1): the
	// long-run path must carry into it too.
	for _, acc := range []uint64{0, 1, 0xffff, 1<<64 - 1, 1<<64 - 0x1234, 0x8000000000000000} {
		for _, n := range []int{63, 64, 65, 100, 1400, 1401} {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			if got, want := fold(sum(b, acc)), refFold(b, acc); got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
				t.Fatalf("len %d, initial %#x: %#04x, reference %#04x", n, acc, got, want)
			}
		}
	}
	// All ones exercises every carry.
	ff := make([]byte, 1500)
	for i := range ff {
		ff[i] = 0xff
	}
	if got, want := Checksum(ff), refChecksum(ff); got != want {
		t.Fatalf("all ones: %#04x, reference %#04x", got, want)
	}
	// RFC 1071's example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
	if got := Checksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}); got != ^uint16(0xddf2) {
		t.Fatalf("RFC 1071 example: %#04x", got)
	}
}

func TestBuiltPacketsVerify(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, udp := range []bool{false, true} {
			s := defSpec(v6, udp)
			s.payload = payload(333, 1)
			checkValid(t, s.build())
		}
	}
}

// BenchmarkChecksum is one MTU-sized segment: the splitter sums every
// segment it makes and the coalescer every packet it merges.
func BenchmarkChecksum(b *testing.B) {
	buf := make([]byte, 1400)
	for i := range buf {
		buf[i] = byte(i)
	}
	b.SetBytes(int64(len(buf)))
	var sink uint16
	for b.Loop() {
		sink += Checksum(buf)
	}
	_ = sink
}

// Update gives what a full recomputation gives, for spans anywhere in
// the data and any values (the one's-complement ±0 included).
func TestUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, 2+r.IntN(60)*2)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		if r.IntN(8) == 0 {
			clear(b) // a sum of zero words
		}
		at := 2 * r.IntN(len(b)/2)
		n := min(len(b)-at, 2*(1+r.IntN(3)))
		c := Checksum(b)
		old := append([]byte(nil), b[at:at+n]...)
		for i := at; i < at+n; i++ {
			b[i] = byte(r.IntN(256))
		}
		got := Update(c, old, b[at:at+n])
		// Stored in the data, both must verify; ±0 may differ.
		if want := Checksum(b); got != want && !(got == 0xffff && want == 0 || got == 0 && want == 0xffff) {
			t.Fatalf("Update %#04x, recomputed %#04x", got, want)
		}
	}
}
