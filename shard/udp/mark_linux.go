package udp

import (
	"os"

	"golang.org/x/sys/unix"
)

// SetMark puts the firewall mark m on every datagram the socket sends
// (SO_MARK; 0 clears it). Policy routing matches it: a full tunnel routes
// everything unmarked into the tunnel and the router's own, marked,
// datagrams by the main table, so they do not loop back into it. The
// kernel reads the mark at each send, so it may be set on a socket in use.
// Needs CAP_NET_ADMIN.
func (c *Conn) SetMark(m uint32) error {
	if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_MARK, int(m)); err != nil {
		return os.NewSyscallError("setsockopt SO_MARK", err)
	}
	return nil
}

// Mark reads the socket's firewall mark back (SO_MARK).
func (c *Conn) Mark() (uint32, error) {
	m, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_MARK)
	if err != nil {
		return 0, os.NewSyscallError("getsockopt SO_MARK", err)
	}
	return uint32(m), nil
}
