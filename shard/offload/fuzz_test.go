package offload

import (
	"encoding/binary"
	"testing"
)

// seedSuperpackets are well-formed TUN reads: virtio-net header, then the
// packet.
func seedSuperpackets() [][]byte {
	var out [][]byte
	for _, v6 := range []bool{false, true} {
		for _, udp := range []bool{false, true} {
			s := defSpec(v6, udp)
			s.payload = payload(3000, 1)
			h, p := superpacket(s, 1000)
			b := make([]byte, HdrLen+len(p))
			h.Encode(b)
			copy(b[HdrLen:], p)
			out = append(out, b)
		}
	}
	return out
}

// FuzzSplit feeds arbitrary TUN reads to the splitter: it must never panic
// or write past its buffer, and every segment of a superpacket it accepts
// must carry valid lengths and checksums.
func FuzzSplit(f *testing.F) {
	for _, b := range seedSuperpackets() {
		f.Add(b)
	}
	f.Add(make([]byte, HdrLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHdr(b)
		if err != nil {
			return
		}
		var sp Splitter
		if sp.Reset(h, b[HdrLen:]) != nil {
			return
		}
		dst := make([]byte, 1500)
		segs := 0
		for {
			n, ok, err := sp.Next(dst)
			if err != nil || !ok {
				break
			}
			segs++
			if segs > sp.Segments() {
				t.Fatalf("more segments than Segments() = %d", sp.Segments())
			}
			if h.GSOType&^GSOECN != GSONone {
				checkValid(t, dst[:n])
			}
		}
	})
}

// FuzzCoalesce feeds arbitrary packet sequences (each prefixed by a 2-byte
// length) to the coalescer: no panic, every packet comes out exactly once,
// and every superpacket splits back into valid segments.
func FuzzCoalesce(f *testing.F) {
	s := defSpec(false, false)
	var seed []byte
	for _, p := range segments(s, 3000, 1000) {
		seed = binary.BigEndian.AppendUint16(seed, uint16(len(p)))
		seed = append(seed, p...)
	}
	f.Add(seed)
	u := defSpec(true, true)
	seed = nil
	for _, p := range segments(u, 2500, 1000) {
		seed = binary.BigEndian.AppendUint16(seed, uint16(len(p)))
		seed = append(seed, p...)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		co := NewCoalescer(4, true, true)
		added, out := 0, 0
		var sp Splitter
		dst := make([]byte, MaxPacket)
		write := func(fr []byte, segs int) {
			out += segs
			if segs == 1 {
				return
			}
			h, err := DecodeHdr(fr)
			if err != nil {
				t.Fatal(err)
			}
			if err := sp.Reset(h, fr[HdrLen:]); err != nil {
				t.Fatalf("superpacket does not split: %v", err)
			}
			if sp.Segments() != segs {
				t.Fatalf("superpacket of %d splits into %d", segs, sp.Segments())
			}
			for {
				n, ok, err := sp.Next(dst)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				checkValid(t, dst[:n])
			}
		}
		for len(b) >= 2 {
			n := int(binary.BigEndian.Uint16(b))
			b = b[2:]
			if n > len(b) {
				n = len(b)
			}
			p := b[:n]
			b = b[n:]
			if !co.Add(p) {
				co.Flush(write)
				if !co.Add(p) {
					t.Fatal("empty coalescer refused a packet")
				}
			}
			added++
		}
		co.Flush(write)
		if out != added {
			t.Fatalf("%d packets in, %d out", added, out)
		}
	})
}
