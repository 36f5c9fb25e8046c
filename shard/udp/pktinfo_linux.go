package udp

import (
	"encoding/binary"
	"net/netip"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Answering from the address that was asked. A socket bound to the
// wildcard address sends with whatever source the routing table picks; on
// a host with several addresses that need not be the one a peer sent to,
// and a peer behind a stateful firewall (or a NAT) drops the answer. With
// EnablePktinfo, Recv reports each datagram's local address (IP_PKTINFO,
// IPV6_PKTINFO) in Batch.Local, and Send and SendFrom put a source address
// on each datagram the same way, so the caller can answer from the
// address that was asked, as WireGuard's sticky sockets do.

// pktinfoSpace is one IPV6_PKTINFO control message (the larger of the two
// families').
var pktinfoSpace = unix.CmsgSpace(unix.SizeofInet6Pktinfo)

// EnablePktinfo turns on per-datagram local addresses. Call it before the
// shard runs, on sockets bound to a wildcard address (on others the local
// address is the bound one).
func (c *Conn) EnablePktinfo() error {
	var err error
	if c.v6 {
		// Also reports IPv4 datagrams of a dual-stack socket, as
		// v4-mapped addresses.
		err = unix.SetsockoptInt(c.fd, unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
	} else {
		err = unix.SetsockoptInt(c.fd, unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
	}
	if err != nil {
		return os.NewSyscallError("setsockopt pktinfo", err)
	}
	c.pktinfo = true
	return nil
}

// Pktinfo reports whether the socket reports and sets local addresses.
func (c *Conn) Pktinfo() bool { return c != nil && c.pktinfo }

// putPktinfo writes a control message that sends from src into ctrl and
// returns its length. On an IPv6 socket an IPv4 source is v4-mapped (the
// kernel's IPv4 path accepts IPV6_PKTINFO with a v4-mapped address).
func (c *Conn) putPktinfo(ctrl []byte, src netip.Addr) int {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&ctrl[0]))
	data := ctrl[unix.CmsgLen(0):]
	if c.v6 {
		h.Level, h.Type = unix.IPPROTO_IPV6, unix.IPV6_PKTINFO
		h.SetLen(unix.CmsgLen(unix.SizeofInet6Pktinfo))
		pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&data[0]))
		*pi = unix.Inet6Pktinfo{Addr: src.As16()}
		return unix.CmsgSpace(unix.SizeofInet6Pktinfo)
	}
	h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
	pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&data[0]))
	*pi = unix.Inet4Pktinfo{Spec_dst: src.Unmap().As4()}
	return unix.CmsgSpace(unix.SizeofInet4Pktinfo)
}

// SendFrom sends one datagram to to from the local address from (the zero
// Addr, or one of the other family: as SendTo); for handshakes, from any
// goroutine.
func (c *Conn) SendFrom(b []byte, to netip.AddrPort, from netip.Addr) error {
	if !c.pktinfo || !sendableFrom(from, to) {
		return c.SendTo(b, to)
	}
	var ctrl [64]byte
	n := c.putPktinfo(ctrl[:], from)
	err := unix.Sendmsg(c.fd, b, ctrl[:n], c.sockaddrTo(to), unix.MSG_DONTWAIT)
	if localRefused(err) {
		return c.SendTo(b, to) // from may not be ours any more
	}
	if err != nil {
		return os.NewSyscallError("sendmsg", err)
	}
	return nil
}

// sendableFrom reports whether a datagram to to may carry local as its
// source: a valid address of to's family (the kernel refuses a source of
// the other family; a lane that moved families keeps the routing table's
// choice).
func sendableFrom(local netip.Addr, to netip.AddrPort) bool {
	return local.IsValid() && local.Unmap().Is4() == to.Addr().Unmap().Is4()
}

// localRefused reports whether err is how the kernel refuses a source
// address the host may no longer have (EINVAL, EADDRNOTAVAIL, or
// ENETUNREACH when no route leaves from it).
func localRefused(err error) bool {
	return err == unix.EINVAL || err == unix.EADDRNOTAVAIL || err == unix.ENETUNREACH
}

// parseCtrl reads the control messages among the n bytes of ctrl: the
// size of the datagrams a UDP GRO message carries (0: one datagram), and
// the local address the datagram arrived at (zero if not reported).
func parseCtrl(ctrl []byte, n int) (seg int, local netip.Addr) {
	hl := unix.CmsgLen(0)
	for n >= hl {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&ctrl[0]))
		l := int(h.Len)
		if l < hl || l > n {
			return seg, local
		}
		body := ctrl[hl:l]
		switch {
		case h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO:
			switch len(body) {
			case 2:
				seg = int(binary.NativeEndian.Uint16(body))
			case 4:
				seg = int(binary.NativeEndian.Uint32(body))
			}
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(body) >= unix.SizeofInet4Pktinfo:
			// Spec_dst, the local address the kernel routed the
			// datagram to (for unicast the header's destination), is
			// what a reply goes out from.
			pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&body[0]))
			local = netip.AddrFrom4(pi.Spec_dst)
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_PKTINFO && len(body) >= unix.SizeofInet6Pktinfo:
			pi := (*unix.Inet6Pktinfo)(unsafe.Pointer(&body[0]))
			local = netip.AddrFrom16(pi.Addr).Unmap()
		}
		sp := unix.CmsgSpace(l - hl)
		if sp > n {
			return seg, local
		}
		ctrl, n = ctrl[sp:], n-sp
	}
	return seg, local
}
