package offload

import (
	"bytes"
	"encoding/binary"
	"testing"
)

type frame struct {
	b    []byte
	segs int
}

func flushAll(c *Coalescer) []frame {
	var out []frame
	c.Flush(func(b []byte, segs int) { out = append(out, frame{append([]byte(nil), b...), segs}) })
	return out
}

// segments cuts spec's payload into TCP segments of size mss (or UDP
// datagrams) as a sender would, PSH on the last.
func segments(s pktSpec, total, mss int) [][]byte {
	var out [][]byte
	p := payload(total, 11)
	for off := 0; off < total; off += mss {
		x := s
		x.payload = p[off:min(off+mss, total)]
		x.seq = s.seq + uint32(off)
		x.id = s.id + uint16(len(out))
		if !s.udp && off+mss >= total {
			x.flags |= tcpPSH
		}
		out = append(out, x.build())
	}
	return out
}

// Split then coalesce gives back the superpacket the kernel handed us,
// byte for byte, with a header that splits it the same way again.
func TestSplitThenCoalesceRoundTrip(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, udp := range []bool{false, true} {
			s := defSpec(v6, udp)
			s.flags = tcpACK | tcpPSH
			if !udp {
				s.opts = []byte{1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 6}
			}
			s.payload = payload(5000, 2)
			h, sp := superpacket(s, 1300)
			segs := splitAll(t, h, sp)
			c := NewCoalescer(4, true, true)
			for _, g := range segs {
				if !c.Add(g) {
					t.Fatal("coalescer full")
				}
			}
			out := flushAll(c)
			if len(out) != 1 || out[0].segs != len(segs) {
				t.Fatalf("v6=%v udp=%v: %d frames", v6, udp, len(out))
			}
			gh, _ := DecodeHdr(out[0].b)
			got := out[0].b[HdrLen:]
			if !bytes.Equal(got, sp) {
				t.Fatalf("v6=%v udp=%v: coalesced packet differs from the original superpacket", v6, udp)
			}
			if gh.GSOType != h.GSOType || gh.GSOSize != h.GSOSize || gh.HdrLen != h.HdrLen ||
				gh.CsumStart != h.CsumStart || gh.CsumOffset != h.CsumOffset || gh.Flags != FlagNeedsCsum {
				t.Fatalf("header %+v, want %+v", gh, h)
			}
			again := splitAll(t, gh, got)
			for i := range again {
				if !bytes.Equal(again[i], segs[i]) {
					t.Fatalf("resplit segment %d differs", i)
				}
			}
		}
	}
}

// A packet alone goes out as it came, with an empty header.
func TestCoalesceSingle(t *testing.T) {
	s := defSpec(false, false)
	s.payload = payload(100, 1)
	p := s.build()
	c := NewCoalescer(2, true, true)
	c.Add(p)
	out := flushAll(c)
	if len(out) != 1 || out[0].segs != 1 || !bytes.Equal(out[0].b[HdrLen:], p) || !bytes.Equal(out[0].b[:HdrLen], make([]byte, HdrLen)) {
		t.Fatalf("single packet changed: %+v", out)
	}
}

// Every rule that forbids a merge: the second packet must not join the
// first, and both must come out unchanged, in order.
func TestCoalesceRefuses(t *testing.T) {
	type mod func(a, b *pktSpec)
	tcp4, tcp6, udp4 := defSpec(false, false), defSpec(true, false), defSpec(false, true)
	cases := []struct {
		name string
		base pktSpec
		m    mod
		fix  func(b []byte) // applied to the second packet after building
	}{
		{"SYN", tcp4, func(a, b *pktSpec) { b.flags = tcpSYN | tcpACK }, nil},
		{"FIN", tcp4, func(a, b *pktSpec) { b.flags = tcpFIN | tcpACK }, nil},
		{"RST", tcp4, func(a, b *pktSpec) { b.flags = tcpRST | tcpACK }, nil},
		{"URG", tcp4, func(a, b *pktSpec) { b.flags = tcpURG | tcpACK }, nil},
		{"ECE", tcp4, func(a, b *pktSpec) { b.flags = tcpECE | tcpACK }, nil},
		{"CWR", tcp4, func(a, b *pktSpec) { b.flags = tcpCWR | tcpACK }, nil},
		{"no ACK", tcp4, func(a, b *pktSpec) { b.flags = 0 }, nil},
		{"IPv4 options", tcp4, func(a, b *pktSpec) { b.ipOpts = []byte{1, 1, 1, 0} }, nil},
		{"TOS", tcp4, func(a, b *pktSpec) { b.tos = 4 }, nil},
		{"TTL", tcp4, func(a, b *pktSpec) { b.ttl = 3 }, nil},
		{"DF", tcp4, func(a, b *pktSpec) { b.df = false }, nil},
		{"traffic class", tcp6, func(a, b *pktSpec) { b.tos = 4 }, nil},
		{"flow label", tcp6, func(a, b *pktSpec) { b.flowLabel = 99 }, nil},
		{"hop limit", tcp6, func(a, b *pktSpec) { b.ttl = 9 }, nil},
		{"ack number", tcp4, func(a, b *pktSpec) { b.ack++ }, nil},
		{"options", tcp4, func(a, b *pktSpec) {
			a.opts = []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}
			b.opts = []byte{1, 1, 8, 10, 0, 0, 0, 2, 0, 0, 0, 2}
		}, nil},
		{"option length", tcp4, func(a, b *pktSpec) { b.opts = []byte{1, 1, 1, 1} }, nil},
		{"seq gap", tcp4, func(a, b *pktSpec) { b.seq += 1 }, nil},
		{"seq behind", tcp4, func(a, b *pktSpec) { b.seq -= 2 * 100 }, nil},
		{"PSH before", tcp4, func(a, b *pktSpec) { a.flags |= tcpPSH }, nil},
		{"short before", tcp4, func(a, b *pktSpec) { a.payload = a.payload[:50] }, nil},
		{"longer segment", tcp4, func(a, b *pktSpec) { b.payload = payload(150, 1) }, nil},
		{"no payload", tcp4, func(a, b *pktSpec) { b.payload = nil }, nil},
		{"bad TCP checksum", tcp4, nil, func(b []byte) { b[len(b)-1] ^= 1 }},
		{"fragment", tcp4, nil, func(b []byte) { b[6] |= 0x20; setIPv4Csum(b, 20) }},
		{"other port", tcp4, func(a, b *pktSpec) { b.sport++ }, nil},
		{"other address", tcp4, func(a, b *pktSpec) { b.dst = b.src }, nil},
		{"window", tcp4, func(a, b *pktSpec) { b.window++ }, nil},
		{"AE bit", tcp4, nil, func(b []byte) { b[32] |= 0x01; fixTCP(b) }},
		{"IPv4 ID without DF", tcp4, func(a, b *pktSpec) { a.df, b.df, b.id = false, false, a.id+5 }, nil},
		{"IPv4 ID random with DF", tcp4, func(a, b *pktSpec) { b.id = a.id + 5 }, nil},
		{"bad IPv4 header checksum", tcp4, nil, func(b []byte) { b[10] ^= 1 }},
		{"UDP bigger", udp4, func(a, b *pktSpec) { b.payload = payload(150, 1) }, nil},
		{"UDP after short", udp4, func(a, b *pktSpec) { a.payload = a.payload[:10] }, nil},
		{"UDP bad checksum", udp4, nil, func(b []byte) { b[len(b)-1] ^= 1 }},
		{"UDP no checksum", udp4, nil, func(b []byte) { b[26], b[27] = 0, 0 }},
		{"UDP length field", udp4, nil, func(b []byte) { binary.BigEndian.PutUint16(b[24:], 9) }},
	}
	for _, c := range cases {
		a, b := c.base, c.base
		a.payload = payload(100, 1)
		b.payload = payload(100, 2)
		b.seq = a.seq + 100
		b.id = a.id + 1
		if c.m != nil {
			c.m(&a, &b)
			if c.name != "seq gap" && c.name != "seq behind" {
				b.seq = a.seq + uint32(len(a.payload))
			}
		}
		pa, pb := a.build(), b.build()
		if c.fix != nil {
			c.fix(pb)
		}
		co := NewCoalescer(4, true, true)
		co.Add(pa)
		co.Add(pb)
		out := flushAll(co)
		if len(out) != 2 || !bytes.Equal(out[0].b[HdrLen:], pa) || !bytes.Equal(out[1].b[HdrLen:], pb) {
			t.Errorf("%s: merged (%d frames)", c.name, len(out))
		}
	}
}

// fixTCP recomputes an IPv4 TCP packet's checksum after a test changed it.
func fixTCP(b []byte) {
	t := b[ipv4Len:]
	t[16], t[17] = 0, 0
	binary.BigEndian.PutUint16(t[16:], ^fold(sum(t, pseudoSum(b, false, protoTCP, len(t)))))
}

// IPv4 IDs: incrementing always merges; equal merges only with DF.
func TestCoalesceIPv4IDs(t *testing.T) {
	for _, c := range []struct {
		df    bool
		step  uint16
		merge bool
	}{{true, 1, true}, {false, 1, true}, {true, 0, true}, {false, 0, false}} {
		a, b := defSpec(false, false), defSpec(false, false)
		a.df, b.df = c.df, c.df
		a.payload, b.payload = payload(100, 1), payload(100, 2)
		b.seq, b.id = a.seq+100, a.id+c.step
		co := NewCoalescer(4, true, true)
		co.Add(a.build())
		co.Add(b.build())
		if got := len(flushAll(co)) == 1; got != c.merge {
			t.Errorf("DF %v, ID step %d: merged %v", c.df, c.step, got)
		}
	}
}

// The control case for TestCoalesceRefuses: the same two packets without
// the change do merge, so each refusal above is the rule's doing.
func TestCoalesceMergesBaseline(t *testing.T) {
	for _, base := range []pktSpec{defSpec(false, false), defSpec(true, false), defSpec(false, true), defSpec(true, true)} {
		a, b := base, base
		a.payload, b.payload = payload(100, 1), payload(100, 2)
		b.seq = a.seq + 100
		co := NewCoalescer(4, true, true)
		co.Add(a.build())
		co.Add(b.build())
		if out := flushAll(co); len(out) != 1 || out[0].segs != 2 {
			t.Fatalf("v6=%v udp=%v: baseline pair not merged", base.v6, base.udp)
		}
	}
}

// Packets of a flow never overtake each other: a packet that cannot join
// (here a FIN) closes the flow's superpacket, so the next data segment
// starts a new one after it.
func TestCoalesceKeepsFlowOrder(t *testing.T) {
	s := defSpec(false, false)
	s.payload = payload(100, 1)
	p1 := s.build()
	fin := s
	fin.seq, fin.flags, fin.payload = s.seq+100, tcpACK|tcpFIN, nil
	p2 := fin.build()
	s3 := s
	s3.seq = s.seq + 100
	p3 := s3.build()
	other := defSpec(false, false)
	other.sport = 1
	other.payload = payload(100, 4)
	po := other.build()
	co := NewCoalescer(8, true, true)
	for _, p := range [][]byte{p1, po, p2, p3} {
		co.Add(p)
	}
	out := flushAll(co)
	if len(out) != 4 {
		t.Fatalf("%d frames", len(out))
	}
	for i, want := range [][]byte{p1, po, p2, p3} {
		if !bytes.Equal(out[i].b[HdrLen:], want) {
			t.Fatalf("frame %d out of order", i)
		}
	}
}

// Two interleaved flows each coalesce into their own superpacket.
func TestCoalesceInterleavedFlows(t *testing.T) {
	a, b := defSpec(false, false), defSpec(true, false)
	sa, sb := segments(a, 4000, 1000), segments(b, 3000, 1000)
	co := NewCoalescer(8, true, true)
	for i := range 4 {
		co.Add(sa[i])
		if i < 3 {
			co.Add(sb[i])
		}
	}
	out := flushAll(co)
	if len(out) != 2 || out[0].segs != 4 || out[1].segs != 3 {
		t.Fatalf("frames %d", len(out))
	}
	for _, f := range out {
		h, _ := DecodeHdr(f.b)
		var sp Splitter
		if err := sp.Reset(h, f.b[HdrLen:]); err != nil {
			t.Fatal(err)
		}
	}
}

// Full: Add refuses without taking the packet; after Flush it fits again.
func TestCoalesceFull(t *testing.T) {
	co := NewCoalescer(1, true, true)
	a, b := defSpec(false, false), defSpec(false, false)
	a.payload, b.payload = payload(10, 1), payload(10, 1)
	b.sport = 7
	if !co.Add(a.build()) || co.Add(b.build()) {
		t.Fatal("second flow accepted into a full coalescer")
	}
	if len(flushAll(co)) != 1 || !co.Add(b.build()) || co.Pending() != 1 {
		t.Fatal("no room after flush")
	}
}

// With the offload off a flow is copied, never merged.
func TestCoalesceOffloadOff(t *testing.T) {
	s := defSpec(false, false)
	co := NewCoalescer(8, false, false)
	for _, p := range segments(s, 3000, 1000) {
		co.Add(p)
	}
	if out := flushAll(co); len(out) != 3 {
		t.Fatalf("%d frames with TSO off", len(out))
	}
	u := defSpec(false, true)
	co.SetOffloads(true, false)
	for _, p := range segments(u, 3000, 1000) {
		co.Add(p)
	}
	if out := flushAll(co); len(out) != 3 {
		t.Fatalf("%d frames with USO off", len(out))
	}
}

// The limits: at most 64 segments, at most MaxPacket bytes.
func TestCoalesceLimits(t *testing.T) {
	s := defSpec(false, false)
	co := NewCoalescer(8, true, true)
	for _, p := range segments(s, 100*100, 100) {
		co.Add(p)
	}
	out := flushAll(co)
	if len(out) != 2 || out[0].segs != 64 || out[1].segs != 36 {
		t.Fatalf("segment cap: %d frames", len(out))
	}
	for _, p := range segments(s, 60*1400, 1400) {
		co.Add(p)
	}
	for _, f := range flushAll(co) {
		if len(f.b)-HdrLen > MaxPacket {
			t.Fatalf("superpacket of %d bytes", len(f.b)-HdrLen)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	s := defSpec(false, false)
	s.payload = payload(20000, 1)
	h, sp := superpacket(s, 1400)
	co := NewCoalescer(64, true, true)
	var spl Splitter
	dst := make([]byte, 2048)
	write := func([]byte, int) {}
	allocs := testing.AllocsPerRun(100, func() {
		_ = spl.Reset(h, sp)
		for {
			n, ok, _ := spl.Next(dst)
			if !ok {
				break
			}
			co.Add(dst[:n])
		}
		co.Flush(write)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per superpacket", allocs)
	}
}

// A shorter segment ends a superpacket: it joins, the next does not.
func TestCoalesceShortSegmentLast(t *testing.T) {
	for _, udp := range []bool{false, true} {
		s := defSpec(false, udp)
		var pkts [][]byte
		for i, n := range []int{100, 50, 50} {
			x := s
			x.payload = payload(n, byte(i))
			x.seq = s.seq + uint32([]int{0, 100, 150}[i])
			pkts = append(pkts, x.build())
		}
		co := NewCoalescer(4, true, true)
		for _, p := range pkts {
			co.Add(p)
		}
		out := flushAll(co)
		if len(out) != 2 || out[0].segs != 2 || !bytes.Equal(out[1].b[HdrLen:], pkts[2]) {
			t.Fatalf("udp=%v: %d frames", udp, len(out))
		}
	}
}
