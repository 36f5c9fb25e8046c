package udp

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A socket gets the buffer it asks for beyond net.core.rmem_max/wmem_max
// when the process may force it (root here), so an untuned gateway does
// not drop bursts in a 208 KiB socket buffer. The request is twice the
// host's maximum (up to 256 MiB), which the plain options would cap.
func TestBuffersPassHostMaximum(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SO_RCVBUFFORCE needs root or CAP_NET_ADMIN")
	}
	c, err := newSocket(netip.MustParseAddrPort("127.0.0.1:0"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, RecvBuffer); err == unix.EPERM {
		t.Skip("root without CAP_NET_ADMIN in the host's user namespace (a container): SO_RCVBUFFORCE refused")
	}
	if rcv, snd, short := c.Buffers(); short || rcv < 2*RecvBuffer || snd < 2*SendBuffer {
		t.Errorf("a new socket: Buffers() = %d, %d, short %v; want at least 2×%d and 2×%d", rcv, snd, short, RecvBuffer, SendBuffer)
	}
	for _, o := range []struct {
		sysctl string
		opt    int
	}{{"rmem_max", unix.SO_RCVBUF}, {"wmem_max", unix.SO_SNDBUF}} {
		raw, err := os.ReadFile("/proc/sys/net/core/" + o.sysctl)
		if err != nil {
			t.Skipf("cannot read the host's maximum: %v", err)
		}
		hostMax, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		// Capped where doubling it would pass what the kernel stores.
		want := min(2*hostMax, 1<<28)
		setBuffers(c.fd, want, want)
		// The kernel doubles what it is given.
		if got, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, o.opt); err != nil || got != 2*want {
			t.Errorf("%s %d: asked for %d, socket has %d, %v; want %d", o.sysctl, hostMax, want, got, err, 2*want)
		}
	}
}

// A socket left with less than it asked for says so.
func TestBuffersShort(t *testing.T) {
	c, err := newSocket(netip.MustParseAddrPort("127.0.0.1:0"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// What an unprivileged router gets on a stock host (or less, if the
	// host's maximum is lower still).
	for _, o := range []int{unix.SO_RCVBUF, unix.SO_SNDBUF} {
		if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, o, 212992); err != nil {
			t.Fatal(err)
		}
	}
	if rcv, snd, short := c.Buffers(); !short || rcv > 2*212992 || snd > 2*212992 {
		t.Errorf("Buffers() = %d, %d, short %v; want at most 425984 each, short", rcv, snd, short)
	}
}
