package udp

import (
	"net/netip"
	"os"
	"testing"
)

// SetMark's mark is the socket's, on group and lane sockets alike, the
// whole 32 bits; 0 clears it.
func TestSetMark(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SO_MARK needs CAP_NET_ADMIN: run as root")
	}
	g, err := ListenGroup(netip.MustParseAddrPort("127.0.0.1:0"), 2)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ListenLane(netip.MustParseAddr("::"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(g, l) {
		defer c.Close()
		for _, m := range []uint32{51820, 0xffffffff, 0} {
			if err := c.SetMark(m); err != nil {
				t.Fatal(err)
			}
			if got, err := c.Mark(); err != nil || got != m {
				t.Fatalf("%v: mark %#x after SetMark(%#x): %v", c.LocalAddr(), got, m, err)
			}
		}
	}
}
