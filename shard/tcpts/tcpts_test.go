package tcpts

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/yip-router/yip-router/shard/offload"
)

// segment builds a TCP segment from src to dst (ports 40000 → 5201) at
// sequence seq with the given options (padded to 4 bytes with NOPs), a
// payload of n bytes and a valid checksum. flags is the TCP flags byte
// (ACK if 0).
func segment(src, dst string, seq uint32, opts []byte, n int, flags byte) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	for len(opts)%4 != 0 {
		opts = append(opts, optNOP)
	}
	tl := tcpLen + len(opts) + n
	var p []byte
	if s.Is4() {
		p = make([]byte, ipv4Len+tl)
		p[0], p[8], p[9] = 0x45, 64, protoTCP
		binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
		copy(p[12:], s.AsSlice())
		copy(p[16:], d.AsSlice())
	} else {
		p = make([]byte, ipv6Len+tl)
		p[0], p[6], p[7] = 0x60, protoTCP, 64
		binary.BigEndian.PutUint16(p[4:], uint16(tl))
		copy(p[8:], s.AsSlice())
		copy(p[24:], d.AsSlice())
	}
	th := p[len(p)-tl:]
	binary.BigEndian.PutUint16(th, 40000)
	binary.BigEndian.PutUint16(th[2:], 5201)
	binary.BigEndian.PutUint32(th[4:], seq)
	th[12] = byte((tcpLen+len(opts))/4) << 4
	if flags == 0 {
		flags = 0x10
	}
	th[13] = flags
	copy(th[tcpLen:], opts)
	for i := range n {
		th[tcpLen+len(opts)+i] = byte(i * 7)
	}
	binary.BigEndian.PutUint16(th[tcpCsum:], ^fold(pseudo(p, len(p)-tl)+sumAll(th)))
	return p
}

// reseal sets p's (IPv4, no IP options) source port and recomputes its
// TCP checksum.
func reseal(p []byte, port uint16) []byte {
	th := p[ipv4Len:]
	binary.BigEndian.PutUint16(th, port)
	th[tcpCsum], th[tcpCsum+1] = 0, 0
	binary.BigEndian.PutUint16(th[tcpCsum:], ^fold(pseudo(p, ipv4Len)+sumAll(th)))
	return p
}

// tsOption is NOP NOP TS(tsval, tsecr), as Linux sends it; lead NOPs
// before it (1 puts TSval at an odd offset).
func tsOption(lead int, tsval uint32) []byte {
	o := make([]byte, lead, lead+optTSLen)
	for i := range o {
		o[i] = optNOP
	}
	o = append(o, optTS, optTSLen)
	o = binary.BigEndian.AppendUint32(o, tsval)
	return binary.BigEndian.AppendUint32(o, 77)
}

const (
	ipv4Len = 20
	ipv6Len = 40
)

// pseudo is the unfolded sum of p's pseudo-header, its TCP header at off.
func pseudo(p []byte, off int) uint32 {
	if p[0]>>4 == 6 {
		return sumAll(p[8:40]) + protoTCP + uint32(len(p)-off)
	}
	return sumAll(p[12:20]) + protoTCP + uint32(len(p)-off)
}

// fold reduces a one's-complement sum to 16 bits.
func fold(s uint32) uint16 {
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}

func sumAll(b []byte) uint32 {
	var s uint32
	for i := 0; i < len(b); i += 2 {
		w := uint32(b[i]) << 8
		if i+1 < len(b) {
			w |= uint32(b[i+1])
		}
		s += w
	}
	return s
}

// valid reports whether p is IPv4 or IPv6 TCP with a checksum that
// verifies, computed from scratch.
func valid(p []byte) bool {
	off, proto, _, ok := offload.Transport(p)
	return ok && proto == protoTCP && off+tcpLen <= len(p) && fold(pseudo(p, off)+sumAll(p[off:])) == 0xffff
}

func tsvalOf(t *testing.T, p []byte) uint32 {
	t.Helper()
	o, ok := parse(p)
	if !ok {
		t.Fatal("no timestamp found")
	}
	return binary.BigEndian.Uint32(p[o.tsval:])
}

// flow notes, for src → dst, a segment at 0, one at 2n (the one at n is
// the hole FEC recovers) and a retransmission of the first sent at
// fillTS: the hole filler whose TSval the host may have taken.
func flow(tb *Table, src, dst string, lead, n int, fillTS uint32) {
	tb.Note(segment(src, dst, 0, tsOption(lead, fillTS-100), n, 0))
	tb.Note(segment(src, dst, uint32(2*n), tsOption(lead, fillTS-98), n, 0))
	tb.Note(segment(src, dst, 0, tsOption(lead, fillTS), n, 0))
}

// A recovered segment older than its flow's newest hole filler takes the
// filler's TSval, with a checksum that still verifies; one newer stays,
// and if it filled a hole itself it becomes the value to raise to. IPv4
// and IPv6, TSval at an even and an odd offset.
func TestRaise(t *testing.T) {
	for _, c := range []struct {
		name, src, dst string
		lead, n        int
	}{
		{"v4", "10.1.0.5", "10.2.0.9", 2, 1000},
		{"v4-odd", "10.1.0.5", "10.2.0.9", 1, 999},
		{"v6", "fd00::5", "fd00:2::9", 2, 1200},
		{"v6-odd", "fd00::5", "fd00:2::9", 3, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tb Table
			flow(&tb, c.src, c.dst, c.lead, c.n, 5000)
			hole := uint32(c.n)
			old := segment(c.src, c.dst, hole, tsOption(c.lead, 4901), c.n, 0)
			if !tb.Raise(old) {
				t.Fatal("an older recovered segment was not raised")
			}
			if got := tsvalOf(t, old); got != 5000 {
				t.Fatalf("TSval %d, want 5000", got)
			}
			if !valid(old) {
				t.Fatal("checksum does not verify after the raise")
			}
			fresh := segment(c.src, c.dst, hole, tsOption(c.lead, 5010), c.n, 0)
			if tb.Raise(fresh) || tsvalOf(t, fresh) != 5010 || !valid(fresh) {
				t.Fatal("a newer recovered segment was changed")
			}
			next := segment(c.src, c.dst, hole, tsOption(c.lead, 5004), c.n, 0)
			if !tb.Raise(next) || tsvalOf(t, next) != 5010 || !valid(next) {
				t.Fatalf("after a newer recovered filler, TSval %d, want 5010", tsvalOf(t, next))
			}
		})
	}
}

// Segments delivered in sequence are not what a recovered one is raised
// to: the host took none of them at its left edge while the hole was
// open, and a raise to one would fail a segment the path reordered
// behind it. Pure ACKs fill nothing either.
func TestRaiseOnlyToFillers(t *testing.T) {
	var tb Table
	tb.Note(segment("10.1.0.5", "10.2.0.9", 0, tsOption(2, 100), 500, 0))
	tb.Note(segment("10.1.0.5", "10.2.0.9", 1000, tsOption(2, 102), 500, 0))
	tb.Note(segment("10.1.0.5", "10.2.0.9", 0, tsOption(2, 150), 0, 0)) // an ACK
	p := segment("10.1.0.5", "10.2.0.9", 500, tsOption(2, 101), 500, 0)
	if tb.Raise(p) || tsvalOf(t, p) != 101 {
		t.Fatalf("raised to %d with no hole filled", tsvalOf(t, p))
	}
}

// A segment delivered below the highest that was sent before the one
// that reached it - an original the path reordered - fills nothing:
// raising to it would fail a segment reordered behind it. A retransmission
// does, received or recovered (a recovered one arrives after data sent
// later, so its timestamp cannot tell it from an original).
func TestRaiseNotToReordered(t *testing.T) {
	var tb Table
	const n = 500
	tb.Note(segment("10.1.0.5", "10.2.0.9", 0, tsOption(2, 100), n, 0))
	tb.Note(segment("10.1.0.5", "10.2.0.9", 3*n, tsOption(2, 103), n, 0))
	tb.Note(segment("10.1.0.5", "10.2.0.9", 2*n, tsOption(2, 102), n, 0)) // reordered
	p := segment("10.1.0.5", "10.2.0.9", n, tsOption(2, 101), n, 0)
	if tb.Raise(p) {
		t.Fatalf("raised to %d, a reordered original's", tsvalOf(t, p))
	}
	tb.Note(segment("10.1.0.5", "10.2.0.9", 0, tsOption(2, 103), n, 0)) // a retransmission, sent as late as the newest
	p = segment("10.1.0.5", "10.2.0.9", n, tsOption(2, 101), n, 0)
	if !tb.Raise(p) || tsvalOf(t, p) != 103 {
		t.Fatalf("after a retransmission: TSval %d, want 103", tsvalOf(t, p))
	}
	tb.Note(segment("10.1.0.5", "10.2.0.9", 6*n, tsOption(2, 400), n, 0)) // new data, sent later
	r := segment("10.1.0.5", "10.2.0.9", 0, tsOption(2, 300), n, 0)       // a retransmission FEC recovered
	if tb.Raise(r) {
		t.Fatal("a recovered segment newer than the filler was changed")
	}
	p = segment("10.1.0.5", "10.2.0.9", 4*n, tsOption(2, 104), n, 0)
	if !tb.Raise(p) || tsvalOf(t, p) != 300 {
		t.Fatalf("after a recovered retransmission: TSval %d, want 300", tsvalOf(t, p))
	}
}

// Timestamps and sequence numbers compare modulo 2^32: new data past the
// wrap fills no hole, a retransmission before it does.
func TestRaiseAcrossWrap(t *testing.T) {
	var in Table
	var top uint32 = 0xffffff38
	for i, ts := range []uint32{0xfffffff0, 0xfffffff1, 3} {
		in.Note(segment("10.1.0.5", "10.2.0.9", top+uint32(i*200), tsOption(2, ts), 200, 0))
	}
	q := segment("10.1.0.5", "10.2.0.9", top+200, tsOption(2, 0xfffffff1), 200, 0)
	if in.Raise(q) {
		t.Fatalf("raised to %#x by data in sequence past the wrap", tsvalOf(t, q))
	}
	var tb Table
	var base uint32 = 0xffffff00 // the sequence wraps within the flow
	tb.Note(segment("10.1.0.5", "10.2.0.9", base, tsOption(2, 0xfffffff0), 200, 0))
	tb.Note(segment("10.1.0.5", "10.2.0.9", base+400, tsOption(2, 0xfffffff1), 200, 0))
	tb.Note(segment("10.1.0.5", "10.2.0.9", base, tsOption(2, 5), 200, 0))
	p := segment("10.1.0.5", "10.2.0.9", base+200, tsOption(2, 0xfffffff0), 200, 0)
	if !tb.Raise(p) || tsvalOf(t, p) != 5 || !valid(p) {
		t.Fatalf("TSval %#x before the wrap not raised to 5", tsvalOf(t, p))
	}
}

// Nothing else is touched: another flow (or the reverse direction), a
// SYN or RST, a fragment, a segment without timestamps or with malformed
// options, non-TCP.
func TestRaiseLeavesOthers(t *testing.T) {
	var tb Table
	flow(&tb, "10.1.0.5", "10.2.0.9", 2, 100, 5000)
	seg := func(src, dst string, opts []byte, n int, flags byte) []byte {
		return segment(src, dst, 100, opts, n, flags)
	}
	frag := seg("10.1.0.5", "10.2.0.9", tsOption(2, 10), 100, 0)
	binary.BigEndian.PutUint16(frag[6:], 0x2000) // more fragments
	udp := seg("10.1.0.5", "10.2.0.9", tsOption(2, 10), 100, 0)
	udp[9] = 17
	for name, p := range map[string][]byte{
		"reverse":   seg("10.2.0.9", "10.1.0.5", tsOption(2, 10), 100, 0),
		"other src": seg("10.1.0.6", "10.2.0.9", tsOption(2, 10), 100, 0),
		"v6":        seg("fd00::5", "fd00:2::9", tsOption(2, 10), 100, 0),
		"syn":       seg("10.1.0.7", "10.2.0.9", tsOption(2, 10), 0, 0x02),
		"rst":       seg("10.1.0.5", "10.2.0.9", tsOption(2, 10), 0, 0x14),
		"no ts":     seg("10.1.0.5", "10.2.0.9", []byte{2, 4, 5, 0xb4}, 100, 0),
		"end first": seg("10.1.0.5", "10.2.0.9", append([]byte{optEnd}, tsOption(2, 10)...), 100, 0),
		"bad len":   seg("10.1.0.5", "10.2.0.9", []byte{optTS, 9, 0, 0, 0, 10, 0, 0, 0}, 100, 0),
		"fragment":  frag,
		"udp":       udp,
	} {
		before := string(p)
		if tb.Raise(p) || string(p) != before {
			t.Errorf("%s: changed", name)
		}
	}
	// The flow itself still raises: none of the above took its slot.
	p := seg("10.1.0.5", "10.2.0.9", tsOption(2, 10), 100, 0)
	if !tb.Raise(p) || tsvalOf(t, p) != 5000 {
		t.Fatalf("the flow's own segment raised to %d, want 5000", tsvalOf(t, p))
	}
}

// A flow that takes another's slot empties it: the other's next recovered
// segment is not raised to what the slot held.
func TestRaiseSlotTaken(t *testing.T) {
	var tb Table
	flow(&tb, "10.1.0.5", "10.2.0.9", 2, 100, 5000)
	other := reseal(segment("10.1.0.5", "10.2.0.9", 0, tsOption(2, 7000), 100, 0), 40047)
	a, _ := parse(segment("10.1.0.5", "10.2.0.9", 0, tsOption(2, 1), 100, 0))
	b, _ := parse(other)
	if a.key.hash() != b.key.hash() || a.key == b.key {
		t.Fatal("the two flows do not share a slot: pick another port")
	}
	tb.Note(other)
	tb.Note(reseal(segment("10.1.0.5", "10.2.0.9", 0, tsOption(2, 7001), 100, 0), 40047))
	p := segment("10.1.0.5", "10.2.0.9", 100, tsOption(2, 4900), 100, 0)
	if tb.Raise(p) {
		t.Fatalf("raised to %d from the flow that took the slot", tsvalOf(t, p))
	}
}

// A SYN starts its flow anew, and a filler's TSval is forgotten after
// fillAge ticks: a raise never carries a value of a connection before.
func TestRaiseForgets(t *testing.T) {
	var tb Table
	flow(&tb, "10.1.0.5", "10.2.0.9", 2, 100, 5000)
	tb.Note(segment("10.1.0.5", "10.2.0.9", 9000, tsOption(2, 10), 0, 0x02))
	p := segment("10.1.0.5", "10.2.0.9", 9001, tsOption(2, 11), 100, 0)
	if tb.Raise(p) {
		t.Fatalf("a new connection's segment raised to %d", tsvalOf(t, p))
	}
	flow(&tb, "10.1.0.5", "10.2.0.9", 2, 100, 5000)
	syn := segment("10.1.0.5", "10.2.0.9", 9000, tsOption(2, 10), 0, 0x02)
	if tb.Raise(syn) { // a SYN FEC recovered: not changed, and the slot empties
		t.Fatal("a recovered SYN was changed")
	}
	p = segment("10.1.0.5", "10.2.0.9", 9001, tsOption(2, 11), 100, 0)
	if tb.Raise(p) {
		t.Fatalf("after a recovered SYN, a segment raised to %d", tsvalOf(t, p))
	}
	flow(&tb, "10.1.0.5", "10.2.0.9", 2, 100, 5000)
	for range fillAge + 1 {
		tb.Tick()
	}
	p = segment("10.1.0.5", "10.2.0.9", 100, tsOption(2, 4900), 100, 0)
	if tb.Raise(p) {
		t.Fatalf("raised to %d after %d ticks", tsvalOf(t, p), fillAge+1)
	}
	flow(&tb, "10.1.0.5", "10.2.0.9", 2, 100, 6000) // fills again: raised again
	p = segment("10.1.0.5", "10.2.0.9", 100, tsOption(2, 5900), 100, 0)
	if !tb.Raise(p) || tsvalOf(t, p) != 6000 {
		t.Fatalf("after a new filler, TSval %d, want 6000", tsvalOf(t, p))
	}
}

// TCP-AO's MAC covers the options: such a segment is never changed. Nor
// is one whose timestamp option runs past its header, and an IPv4 header
// with options is read past them.
func TestRaiseHeaders(t *testing.T) {
	var tb Table
	flow(&tb, "10.1.0.5", "10.2.0.9", 2, 100, 5000)
	ao := segment("10.1.0.5", "10.2.0.9", 100, append(tsOption(2, 4900), optAO, 4, 0, 0), 100, 0)
	short := segment("10.1.0.5", "10.2.0.9", 100, tsOption(2, 4900), 100, 0)
	short[ipv4Len+12] = 7 << 4 // 28 bytes: the option ends past them
	for name, p := range map[string][]byte{"tcp-ao": ao, "option past header": short} {
		before := string(p)
		if tb.Raise(p) || string(p) != before {
			t.Errorf("%s: changed", name)
		}
	}
	p := segment("10.1.0.5", "10.2.0.9", 100, tsOption(1, 4900), 100, 0)
	p = append(p[:ipv4Len:ipv4Len], append([]byte{1, 1, 1, 0}, p[ipv4Len:]...)...)
	p[0] = 0x46
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	if !valid(p) {
		t.Fatal("test packet with IP options does not verify")
	}
	if !tb.Raise(p) || tsvalOf(t, p) != 5000 || !valid(p) {
		t.Fatalf("behind IP options: TSval %d, want 5000", tsvalOf(t, p))
	}
	// IPv6 with a hop-by-hop header (8 bytes) before TCP.
	flow(&tb, "fd00::5", "fd00:2::9", 2, 100, 7000)
	v6 := segment("fd00::5", "fd00:2::9", 100, tsOption(1, 6900), 100, 0)
	hbh := append(append(append([]byte(nil), v6[:ipv6Len]...), protoTCP, 0, 1, 4, 0, 0, 0, 0), v6[ipv6Len:]...)
	hbh[6] = 0
	binary.BigEndian.PutUint16(hbh[4:], uint16(len(hbh)-ipv6Len))
	if !valid(hbh) {
		t.Fatal("test packet with a hop-by-hop header does not verify")
	}
	if !tb.Raise(hbh) || tsvalOf(t, hbh) != 7000 || !valid(hbh) {
		t.Fatalf("behind a hop-by-hop header: TSval %d, want 7000", tsvalOf(t, hbh))
	}
}

// Raise and Note allocate nothing: they run for every packet a lane
// delivers while it receives parity.
func TestNoAllocs(t *testing.T) {
	var tb Table
	flow(&tb, "10.1.0.5", "10.2.0.9", 2, 1300, 5000)
	n := segment("10.1.0.5", "10.2.0.9", 2600, tsOption(2, 5001), 1300, 0)
	r := segment("10.1.0.5", "10.2.0.9", 1300, tsOption(2, 4000), 1300, 0)
	if a := testing.AllocsPerRun(100, func() { tb.Note(n); tb.Raise(r) }); a != 0 {
		t.Fatalf("%v allocations per Note and Raise", a)
	}
}

// Any bytes: no panic, and a segment is changed only in its TSval and
// checksum, with the checksum still verifying if it did.
func FuzzRaise(f *testing.F) {
	f.Add(segment("10.1.0.5", "10.2.0.9", 0, tsOption(2, 5000), 10, 0), segment("10.1.0.5", "10.2.0.9", 0, tsOption(1, 4000), 10, 0))
	f.Add(segment("fd00::5", "fd00:2::9", 7, tsOption(3, 9), 1, 0), segment("fd00::5", "fd00:2::9", 5, tsOption(0, 8), 0, 0))
	f.Add([]byte{0x45, 0, 0, 20}, []byte{0x60})
	f.Fuzz(func(t *testing.T, noted, recovered []byte) {
		var tb Table
		tb.Note(noted)
		tb.Note(noted)
		wasValid := valid(recovered)
		before := string(recovered)
		if !tb.Raise(recovered) {
			if string(recovered) != before {
				t.Fatal("changed without reporting it")
			}
			return
		}
		o, _ := parse(recovered)
		for i := range recovered {
			if (i < o.tsval || i >= o.tsval+4) && i != o.tcp+tcpCsum && i != o.tcp+tcpCsum+1 && recovered[i] != before[i] {
				t.Fatalf("byte %d changed", i)
			}
		}
		if wasValid && !valid(recovered) {
			t.Fatal("a valid checksum no longer verifies")
		}
	})
}

// MaybeTCP passes every packet Raise could change and turns away the
// rest of what it can tell by two bytes.
func TestMaybeTCP(t *testing.T) {
	v4 := segment("10.1.0.5", "10.2.0.9", 0, tsOption(2, 1), 100, 0)
	v6 := segment("fd00::5", "fd00:2::9", 0, tsOption(2, 1), 100, 0)
	udp := append([]byte(nil), v4...)
	udp[9] = 17
	hbh := append([]byte(nil), v6...)
	hbh[6] = 0
	dst := append([]byte(nil), v6...)
	dst[6] = 60
	for _, c := range []struct {
		name string
		p    []byte
		want bool
	}{{"v4", v4, true}, {"v6", v6, true}, {"v6 hop-by-hop", hbh, true}, {"v6 destination options", dst, true}, {"udp", udp, false}, {"short", v4[:39], false}} {
		if got := MaybeTCP(c.p); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
