package router

import (
	"context"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// With a mark, the resolver's query sockets carry it (a full tunnel's
// lookups then leave by the underlay, not the tunnel).
func TestMarkedResolverMarksQueries(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SO_MARK needs CAP_NET_ADMIN (root)")
	}
	c, err := markedResolver(0x2a).Dial(context.Background(), "udp", "127.0.0.1:53")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.(*net.UDPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var mark int
	var gerr error
	if err := rc.Control(func(fd uintptr) { mark, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK) }); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if mark != 0x2a {
		t.Fatalf("query socket mark %#x, want 0x2a", mark)
	}
}
