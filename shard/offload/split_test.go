package offload

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func splitAll(t *testing.T, h Hdr, pkt []byte) [][]byte {
	t.Helper()
	var sp Splitter
	if err := sp.Reset(h, pkt); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	var out [][]byte
	for {
		dst := make([]byte, 2048)
		n, ok, err := sp.Next(dst)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if !ok {
			break
		}
		out = append(out, dst[:n])
	}
	if len(out) != sp.Segments() {
		t.Fatalf("%d segments, Segments() says %d", len(out), sp.Segments())
	}
	return out
}

func TestSplitTCP(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		s := defSpec(v6, false)
		s.flags = tcpACK | tcpPSH | tcpFIN | tcpCWR
		s.opts = []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2} // NOP NOP timestamps
		s.payload = payload(4500, 3)
		h, sp := superpacket(s, 1000)
		segs := splitAll(t, h, sp)
		if len(segs) != 5 {
			t.Fatalf("v6=%v: %d segments, want 5", v6, len(segs))
		}
		ipl := ipv4Len
		if v6 {
			ipl = ipv6Len
		}
		var got []byte
		for i, g := range segs {
			checkValid(t, g)
			th := g[ipl:]
			if seq := binary.BigEndian.Uint32(th[4:]); seq != s.seq+uint32(i*1000) {
				t.Errorf("segment %d seq %d", i, seq)
			}
			last := i == len(segs)-1
			if f := th[13]; (f&(tcpFIN|tcpPSH) != 0) != last || (f&tcpCWR != 0) != (i == 0) || f&tcpACK == 0 {
				t.Errorf("segment %d flags %#x", i, f)
			}
			if !v6 {
				if id := binary.BigEndian.Uint16(g[4:]); id != s.id+uint16(i) {
					t.Errorf("segment %d IPv4 ID %d", i, id)
				}
			}
			if !bytes.Equal(th[tcpLen:tcpLen+len(s.opts)], s.opts) {
				t.Errorf("segment %d lost its options", i)
			}
			got = append(got, th[tcpLen+len(s.opts):]...)
		}
		if !bytes.Equal(got, s.payload) {
			t.Fatalf("v6=%v: payload differs after split", v6)
		}
	}
}

func TestSplitUDP(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		s := defSpec(v6, true)
		s.payload = payload(3000, 9)
		h, sp := superpacket(s, 1200)
		segs := splitAll(t, h, sp)
		if len(segs) != 3 {
			t.Fatalf("%d segments", len(segs))
		}
		var got []byte
		for i, g := range segs {
			checkValid(t, g)
			want := 1200
			if i == 2 {
				want = 600
			}
			ipl := ipv4Len
			if v6 {
				ipl = ipv6Len
			}
			if len(g) != ipl+udpLen+want {
				t.Errorf("segment %d is %d bytes", i, len(g))
			}
			got = append(got, g[len(g)-want:]...)
		}
		if !bytes.Equal(got, s.payload) {
			t.Fatal("payload differs after split")
		}
	}
}

// A single packet with a partial checksum comes out with it completed.
func TestSplitCompletesPartialChecksum(t *testing.T) {
	for _, udp := range []bool{false, true} {
		s := defSpec(false, udp)
		s.payload = payload(100, 5)
		h, pkt := superpacket(s, 0)
		h.GSOType, h.GSOSize = GSONone, 0
		out := splitAll(t, h, pkt)
		if len(out) != 1 {
			t.Fatalf("%d packets", len(out))
		}
		checkValid(t, out[0])
		if !bytes.Equal(out[0], s.build()) {
			t.Fatal("completed packet differs from the original")
		}
	}
	// Without NEEDS_CSUM the packet passes unchanged.
	raw := []byte{1, 2, 3}
	if out := splitAll(t, Hdr{}, raw); len(out) != 1 || !bytes.Equal(out[0], raw) {
		t.Fatal("plain packet changed")
	}
}

// hdr_len from the kernel is ignored: a wrong one changes nothing.
func TestSplitIgnoresHdrLen(t *testing.T) {
	s := defSpec(false, false)
	s.payload = payload(2000, 1)
	h, sp := superpacket(s, 1000)
	want := splitAll(t, h, sp)
	for _, bad := range []uint16{0, 1, 54, 1000, 65535} {
		h.HdrLen = bad
		got := splitAll(t, h, sp)
		if len(got) != len(want) || !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
			t.Fatalf("hdr_len %d changed the split", bad)
		}
	}
}

func TestSplitRefuses(t *testing.T) {
	tcp := defSpec(false, false)
	tcp.payload = payload(100, 1)
	h, pkt := superpacket(tcp, 50)
	cases := []struct {
		name string
		h    Hdr
		pkt  []byte
	}{
		{"UFO", Hdr{GSOType: GSOUDP, GSOSize: 50}, pkt},
		{"unknown type", Hdr{GSOType: 9, GSOSize: 50}, pkt},
		{"TCPv6 on IPv4", Hdr{GSOType: GSOTCPv6, GSOSize: 50}, pkt},
		{"UDP_L4 on TCP", Hdr{GSOType: GSOUDPL4, GSOSize: 50}, pkt},
		{"zero gso_size", Hdr{GSOType: GSOTCPv4}, pkt},
		{"truncated TCP header", h, pkt[:30]},
		{"not IP", h, make([]byte, 60)},
		{"csum beyond packet", Hdr{Flags: FlagNeedsCsum, CsumStart: 20, CsumOffset: 200}, pkt},
	}
	for _, c := range cases {
		var sp Splitter
		if err := sp.Reset(c.h, c.pkt); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	// A segment larger than the output buffer is an error, not a cut.
	var sp Splitter
	if err := sp.Reset(h, pkt); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sp.Next(make([]byte, 60)); err != ErrSegSize {
		t.Fatalf("small buffer: %v", err)
	}
}

func TestVnetHdrRoundTrip(t *testing.T) {
	h := Hdr{Flags: 1, GSOType: GSOTCPv6, HdrLen: 74, GSOSize: 1388, CsumStart: 40, CsumOffset: 16}
	var b [HdrLen]byte
	h.Encode(b[:])
	if g, err := DecodeHdr(b[:]); err != nil || g != h {
		t.Fatalf("%+v %v", g, err)
	}
	if binary.NativeEndian.Uint16(b[4:]) != 1388 {
		t.Fatal("not in the host's byte order")
	}
	if _, err := DecodeHdr(b[:9]); err != ErrShortHdr {
		t.Fatal("short header accepted")
	}
}

// An IPv6 superpacket with hop-by-hop and destination-options headers is
// split with them copied into every segment; one with a routing header is
// refused (it changes the pseudo-header's destination).
func TestSplitIPv6ExtensionHeaders(t *testing.T) {
	s := defSpec(true, false)
	s.payload = payload(3000, 4)
	h, plain := superpacket(s, 1000)
	// Insert hop-by-hop (8 bytes, PadN) then destination options (8
	// bytes) between the fixed header and TCP.
	ext := []byte{ipv6DstOpts, 0, 1, 4, 0, 0, 0, 0, protoTCP, 0, 1, 4, 0, 0, 0, 0}
	pkt := append(append(append([]byte{}, plain[:ipv6Len]...), ext...), plain[ipv6Len:]...)
	pkt[6] = ipv6HopByHop
	binary.BigEndian.PutUint16(pkt[4:], uint16(len(pkt)-ipv6Len))
	h.CsumStart += uint16(len(ext))
	segs := splitAll(t, h, pkt)
	if len(segs) != 3 {
		t.Fatalf("%d segments", len(segs))
	}
	var got []byte
	for _, g := range segs {
		ip, ok := parseIP(g)
		if !ok || !ipLenOK(g, ip) {
			t.Fatal("bad IPv6 header in a segment")
		}
		if !bytes.Equal(g[ipv6Len:ipv6Len+len(ext)], ext) {
			t.Fatal("extension headers not copied")
		}
		off := ipv6Len + len(ext)
		if !transportValid(g, true, protoTCP, off) {
			t.Fatal("TCP checksum does not verify")
		}
		got = append(got, g[off+tcpLen:]...)
	}
	if !bytes.Equal(got, s.payload) {
		t.Fatal("payload differs")
	}
	routing := append([]byte{}, pkt...)
	routing[6] = 43
	var sp Splitter
	if sp.Reset(h, routing) == nil {
		t.Fatal("routing header accepted")
	}
	runaway := append([]byte{}, pkt...)
	runaway[ipv6Len+1] = 200 // hop-by-hop length past the packet
	if sp.Reset(h, runaway) == nil {
		t.Fatal("extension header past the packet accepted")
	}
}
