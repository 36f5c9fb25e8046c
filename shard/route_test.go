package shard

import (
	"net/netip"
	"testing"
)

func TestTableLongestPrefix(t *testing.T) {
	tb := NewTable([]Route{
		{netip.MustParsePrefix("0.0.0.0/0"), 1},
		{netip.MustParsePrefix("10.0.0.0/8"), 2},
		{netip.MustParsePrefix("10.1.2.0/24"), 3},
		{netip.MustParsePrefix("10.1.2.7/32"), 4},
		{netip.MustParsePrefix("2001:db8::/32"), 5},
		{netip.MustParsePrefix("2001:db8:1::/48"), 6},
		{netip.MustParsePrefix("2001:db8:1:ff80::/57"), 7},
	})
	for addr, want := range map[string]PeerID{
		"10.1.2.7": 4, "10.1.2.8": 3, "10.1.3.1": 2, "192.0.2.1": 1,
		"2001:db8::1": 5, "2001:db8:1::1": 6, "2001:db8:1:ffff::1": 7, "2001:db8:1:ff7f::1": 6,
		"2001:db9::1": NoPeer,
	} {
		a := netip.MustParseAddr(addr)
		var got PeerID
		if a.Is4() {
			got = tb.Lookup4(a.As4())
		} else {
			got = tb.Lookup6(a.As16())
		}
		if got != want {
			t.Errorf("%s → %d, want %d", addr, got, want)
		}
	}
	pkt4 := make([]byte, 20)
	pkt4[0] = 0x45
	copy(pkt4[12:], []byte{10, 1, 2, 7})
	copy(pkt4[16:], []byte{10, 1, 3, 9})
	if tb.LookupPacket(pkt4, true) != 4 || tb.LookupPacket(pkt4, false) != 2 {
		t.Error("LookupPacket v4")
	}
	if tb.LookupPacket(pkt4[:19], false) != NoPeer || tb.LookupPacket([]byte{0x10}, false) != NoPeer {
		t.Error("malformed packets routed")
	}
	if a := testing.AllocsPerRun(100, func() { tb.LookupPacket(pkt4, false) }); a != 0 {
		t.Errorf("lookup allocates %.1f", a)
	}
}
