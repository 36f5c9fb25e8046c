// Package udp is the shards' UDP layer: sockets in an SO_REUSEPORT group
// steered by an eBPF program on the lane remote (or, where the kernel
// refuses eBPF, a classic BPF program on the source port), per-lane
// sockets, and batched recvmmsg/sendmmsg on raw non-blocking fds.
//
// It calls the syscalls through x/sys/unix directly instead of x/net's
// ReadBatch/WriteBatch because those park the goroutine in Go's netpoller
// on EAGAIN; a shard instead sleeps in one poll(2) over all its fds on its
// pinned thread and must never block inside a read.
package udp

import (
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Conn is one UDP socket driven by a shard.
type Conn struct {
	fd int
	v6 bool
	// dual: an IPv6 socket bound to :: that also carries IPv4 (as
	// v4-mapped addresses, which Recv unmaps and Send makes).
	dual  bool
	local netip.AddrPort
	// gso is read and cleared by the owning shard's Send, read by
	// status from other goroutines; gro is set before the shard runs.
	gso atomic.Bool
	gro bool
	// pktinfo: Recv reports local addresses, Send sets them
	// (pktinfo_linux.go); set before the shard runs.
	pktinfo bool
	gsoErr  atomic.Pointer[error] // why GSO went off at run time
}

// Fd is the socket for poll(2).
func (c *Conn) Fd() int { return c.fd }

// LocalAddr is the bound address.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// Close closes the socket.
func (c *Conn) Close() error {
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

func sockaddr(ap netip.AddrPort) (unix.Sockaddr, bool) {
	if ap.Addr().Is4() || ap.Addr().Is4In6() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}, false
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}, true
}

// setBuffers gives fd rcv bytes of receive and snd bytes of send buffer
// (RecvBuffer, SendBuffer).
// SO_RCVBUFFORCE and SO_SNDBUFFORCE pass net.core.rmem_max/wmem_max
// (stock: 212992, a few milliseconds of a busy lane) and need CAP_NET_ADMIN
// in the host's user namespace, which a router creating its TUN device has
// unless it runs in an unprivileged container (a user namespace of its
// own); there the plain options give what the host's maximum allows
// (tuning/ raises it). The sizes are best effort: a smaller buffer drops
// bursts (counted as kernel socket drops), it does not stop the router.
func setBuffers(fd, rcv, snd int) {
	for _, o := range [][3]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, rcv}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, snd}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], o[2]) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], o[2])
		}
	}
}

// Buffers reports the socket's receive and send buffers as the kernel
// counts them (twice what was asked for), and whether either is smaller
// than what it asked for: setBuffers could not force it (no CAP_NET_ADMIN
// in the host's user namespace) and the host's maximum is lower.
func (c *Conn) Buffers() (rcv, snd int, short bool) {
	rcv, _ = unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	snd, _ = unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	return rcv, snd, rcv < 2*RecvBuffer || snd < 2*SendBuffer
}

func newSocket(local netip.AddrPort, reuse bool) (*Conn, error) {
	sa, v6 := sockaddr(local)
	family := unix.AF_INET
	if v6 {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	// Bound to :: the socket takes both families (one socket per role, so
	// steering and batching stay as they are, and a lane can move between
	// families); bound to a specific IPv6 address, only IPv6.
	c := &Conn{fd: fd, v6: v6, dual: local.Addr() == netip.IPv6Unspecified()}
	fail := func(what string, err error) (*Conn, error) {
		c.Close()
		return nil, fmt.Errorf("udp %s: %s: %w", local, what, err)
	}
	if v6 {
		only := 1
		if c.dual {
			only = 0
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, only); err != nil {
			return fail("IPV6_V6ONLY", err)
		}
	}
	if reuse {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return fail("SO_REUSEPORT", err)
		}
	}
	setBuffers(fd, RecvBuffer, SendBuffer)
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	switch a := got.(type) {
	case *unix.SockaddrInet4:
		c.local = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		c.local = netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return c, nil
}

// SendTo sends one datagram; for the control plane (handshakes), which may
// call it from any goroutine: the kernel serialises sends on a socket.
func (c *Conn) SendTo(b []byte, to netip.AddrPort) error {
	if err := unix.Sendto(c.fd, b, unix.MSG_DONTWAIT, c.sockaddrTo(to)); err != nil {
		return os.NewSyscallError("sendto", err)
	}
	return nil
}

// sockaddrTo is to as this socket's family addresses it: an IPv6 socket
// sends to IPv4 as a v4-mapped address.
func (c *Conn) sockaddrTo(to netip.AddrPort) unix.Sockaddr {
	sa, v6 := sockaddr(to)
	if c.v6 && !v6 {
		sa = &unix.SockaddrInet6{Port: int(to.Port()), Addr: to.Addr().As16()}
	}
	return sa
}
