package offload

import (
	"math/rand/v2"
	"testing"
)

// refChecksum is RFC 1071 the slow way: 16-bit words, fold at the end.
func refChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

func TestChecksumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 200 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if got, want := Checksum(b), refChecksum(b); got != want {
			t.Fatalf("len %d: %#04x, reference %#04x", n, got, want)
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
