package shard

// Small rules, each in one function: which of two crossed claims keeps an
// address, which peer an inner IPv6 packet belongs to, what a peer's
// length sample draws, and how far a pad may reach into its buffer.

import (
	"testing"

	"github.com/yip-router/yip-router/crypto"
)

// Two shards that made crossed claims on one address each decide alone
// which keeps it, so the rule must pick exactly one of any two titles
// (claims by different shards or at different stamps), and what it picks
// is what claim.go says: a stamped claim over an unstamped entry, a
// completed handshake over anything else, the later of two handshakes,
// the earlier of two other claims, the lower shard on equal stamps.
func TestOutranksPicksExactlyOne(t *testing.T) {
	var titles []title
	for _, p := range []proof{unproven, datagramProof, handshakeProof} {
		for _, stamp := range []uint64{1, 2, 7} {
			for _, sh := range []int{0, 1, 3} {
				titles = append(titles, title{proof: p, stamp: stamp, shard: sh})
			}
		}
	}
	for _, a := range titles {
		for _, b := range titles {
			if a.stamp == b.stamp && a.shard == b.shard {
				continue // one shard's clock gives no two claims one stamp
			}
			if ab, ba := a.outranks(b), b.outranks(a); ab == ba {
				t.Fatalf("%+v outranks %+v: %v, and the other way: %v", a, b, ab, ba)
			}
		}
	}
	hs := func(stamp uint64, sh int) title { return title{proof: handshakeProof, stamp: stamp, shard: sh} }
	dg := func(stamp uint64, sh int) title { return title{proof: datagramProof, stamp: stamp, shard: sh} }
	for _, c := range []struct {
		name string
		a, b title
		want bool
	}{
		{"stamped over unstamped", title{proof: unproven, stamp: 1}, title{proof: handshakeProof}, true},
		{"unstamped over stamped", title{proof: handshakeProof}, title{proof: unproven, stamp: 1}, false},
		{"unstamped over unstamped", title{proof: handshakeProof}, title{proof: datagramProof}, false},
		{"handshake over an earlier datagram", hs(9, 1), dg(2, 0), true},
		{"handshake over a later datagram", hs(2, 1), dg(9, 0), true},
		{"later handshake", hs(5, 1), hs(4, 0), true},
		{"earlier handshake", hs(4, 0), hs(5, 1), false},
		{"earlier datagram", dg(4, 1), dg(5, 0), true},
		{"later datagram", dg(5, 0), dg(4, 1), false},
		{"earlier unproven claim over a later datagram", title{proof: unproven, stamp: 3, shard: 1}, dg(4, 0), true},
		{"equal stamps: lower shard", dg(4, 0), dg(4, 1), true},
		{"equal stamps: higher shard", hs(4, 2), hs(4, 1), false},
	} {
		if got := c.a.outranks(c.b); got != c.want {
			t.Errorf("%s: %+v outranks %+v = %v", c.name, c.a, c.b, got)
		}
	}
}

// IPv6 packets are routed by their destination (egress) or checked by
// their source (ingress, AllowedIPs); anything shorter than its version's
// header, or of another version, belongs to no peer.
func TestLookupPacketIPv6AndMalformed(t *testing.T) {
	tb := NewTable(append(append([]Route(nil), routesA...), routesB...))
	p := ipPacket("fd00:1::5", "fd00:2::9", 60, 0)
	if src, dst := tb.LookupPacket(p, true), tb.LookupPacket(p, false); src != 1 || dst != 2 {
		t.Fatalf("fd00:1::5 → fd00:2::9: source peer %d, destination peer %d; want 1 and 2", src, dst)
	}
	v4 := ipPacket("10.1.0.5", "10.2.0.9", 60, 0)
	other := append([]byte(nil), v4...)
	other[0] = 0x55 // version 5
	for name, pkt := range map[string][]byte{
		"empty":             nil,
		"short IPv6 header": p[:39],
		"IPv4 as version 5": other,
		"IPv6 version nibble on an IPv4-sized packet": append([]byte{0x60}, v4[1:]...),
	} {
		for _, src := range []bool{false, true} {
			if got := tb.LookupPacket(pkt, src); got != NoPeer {
				t.Errorf("%s (source %v): peer %d", name, src, got)
			}
		}
	}
}

// Draw gives one of the lengths sampled, each of them in time, nothing
// before the first, and skips a slot a concurrent Add claimed but has not
// written yet.
func TestWireLensDraw(t *testing.T) {
	var w WireLens
	if n, ok := w.Draw(); ok {
		t.Fatalf("drew %d from an empty sample", n)
	}
	w.next.Add(1) // a slot claimed, not yet written
	if n, ok := w.Draw(); ok {
		t.Fatalf("drew %d from a sample whose only slot is unwritten", n)
	}
	w.Add(100)
	w.Add(300)
	seen := map[int]int{}
	for range 400 {
		n, ok := w.Draw()
		if !ok || (n != 100 && n != 300) {
			t.Fatalf("drew %d (%v), not a length added", n, ok)
		}
		seen[n]++
	}
	if seen[100] == 0 || seen[300] == 0 {
		t.Fatalf("400 draws gave %v: a length never drawn", seen)
	}
}

// A pad never reaches past its buffer (room for the tag kept): a drawn
// or given pad longer than the room is cut to it, and with less room than
// the shortest pad the datagram goes unpadded.
func TestPadFrameWithinBuffer(t *testing.T) {
	s := newSide(t, 1, routesA).shards[0]
	s.cfg.Padding = Padding{Mode: PadFull, MaxWire: 9000}
	const size, end = 100, 60
	room := size - end - crypto.TagLen
	for range 50 {
		// Within the room, the pad and the tag after it end inside buf.
		if pad := s.padFrame(make([]byte, size), end, 1500, 0); int(pad) > room || pad < crypto.MinPad {
			t.Fatalf("pad %d with room for %d", pad, room)
		}
	}
	if pad := s.padFrame(make([]byte, size), end, 200, 500); int(pad) != room {
		t.Fatalf("a given pad of 500 became %d, want the room, %d", pad, room)
	}
	if pad := s.padFrame(make([]byte, size), size-crypto.TagLen-1, 200, 0); pad != 0 {
		t.Fatalf("pad %d with room for 1 byte", pad)
	}
}
