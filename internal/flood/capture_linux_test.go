package flood

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

func TestCaptureDatagrams(t *testing.T) {
	a, b := netip.MustParseAddrPort("172.31.250.1:40000"), netip.MustParseAddrPort("172.31.250.2:47133")
	o := &CaptureOptions{Src: a.Addr(), Port: b.Port()}
	pkt := func(n int, src, dst netip.AddrPort) []byte {
		return UDPPacket(make([]byte, 28+n), src, dst, make([]byte, n))
	}
	for _, c := range []struct {
		name string
		p    []byte
		want int
	}{
		{"datagram", pkt(1000, a, b), 1},
		{"other source", pkt(1000, netip.MustParseAddrPort("172.31.250.9:40000"), b), 0},
		{"other port", pkt(1000, a, netip.MustParseAddrPort("172.31.250.2:9")), 0},
		{"over 1500 bytes", pkt(1600, a, b), 0},
		{"too short", pkt(1000, a, b)[:27], 0},
	} {
		if got := len(o.datagrams(c.p)); got != c.want {
			t.Errorf("%s: %d datagrams, want %d", c.name, got, c.want)
		}
	}

	// With SplitGSO each read starts with a virtio_net_hdr.
	o.SplitGSO = true
	vnet := func(gsoType uint8, size uint16, p []byte) []byte {
		h := make([]byte, vnetHdrLen)
		h[1] = gsoType
		binary.NativeEndian.PutUint16(h[4:], size)
		return append(h, p...)
	}
	if got := o.datagrams(vnet(vnetGSOUDPL4, 1200, pkt(3000, a, b))); len(got) != 3 || len(got[2]) != 28+600 {
		t.Fatalf("a GSO run of 3000 bytes in 1200: %d datagrams", len(got))
	}
	if got := o.datagrams(vnet(0, 0, pkt(1000, a, b))); len(got) != 1 || len(got[0]) != 1028 {
		t.Fatalf("a plain datagram behind a vnet header: %d", len(got))
	}
	if got := o.datagrams(vnet(0, 0, pkt(3000, a, b))); len(got) != 0 {
		t.Fatal("a 3000-byte packet without GSO taken")
	}
	buf := vnet(vnetGSOUDPL4, 1200, pkt(3000, a, b))
	got := o.datagrams(buf)
	clear(buf)
	if got[0][0] != 0x45 {
		t.Fatal("datagrams alias the read buffer")
	}
}
