package udp

// Batched I/O: a Batch of message headers made once per shard, Recv over
// recvmmsg and Send over sendmmsg (with GSO runs and source addresses),
// on non-blocking fds and without allocation.

import (
	"encoding/binary"
	"net/netip"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Batch is a set of message headers for recvmmsg/sendmmsg, allocated once
// per shard so a batched call allocates nothing.
type Batch struct {
	msgs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	ctrl  []byte // one control buffer (ctrlLen) per message
	first []int  // Send: the first datagram of each message
	info  []bool // Send: the message carries a local address (pktinfo)
	// Bufs are the caller's buffers; Sizes the lengths received (or to
	// send); Addrs the peers; Sent, after Send, which datagrams the
	// kernel took; Seg, after Recv, the size of the datagrams a UDP GRO
	// message carries back to back (0: the message is one datagram).
	// Local, on a socket with EnablePktinfo, is each datagram's local
	// address: the one it arrived at (Recv), the one to send it from
	// (Send; the zero Addr: the routing table's choice).
	Bufs  [][]byte
	Sizes []int
	Addrs []netip.AddrPort
	Local []netip.Addr
	Sent  []bool
	Seg   []int
	// LocalGone, after Send, is a local address the kernel refused as a
	// source (the host no longer has it: renumbered, failed over); the
	// datagrams that asked for it went from the routing table's choice
	// instead, and the caller should stop asking for it.
	LocalGone netip.Addr
}

// NewBatch makes a batch of n messages.
func NewBatch(n int) *Batch {
	return &Batch{
		msgs:  make([]unix.Mmsghdr, n),
		iovs:  make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrInet6, n),
		ctrl:  make([]byte, n*ctrlLen),
		first: make([]int, n),
		info:  make([]bool, n),
		Bufs:  make([][]byte, n),
		Sizes: make([]int, n),
		Addrs: make([]netip.AddrPort, n),
		Local: make([]netip.Addr, n),
		Sent:  make([]bool, n),
		Seg:   make([]int, n),
	}
}

// Len is the batch capacity.
func (b *Batch) Len() int { return len(b.msgs) }

// Recv receives up to n messages into b.Bufs[:n] without blocking and fills
// Sizes, Addrs and Seg. It returns 0 when nothing is queued. With UDP GRO
// on, a message may carry several datagrams of one sender (Seg bytes each,
// the last possibly shorter): the buffers must then hold 64 KB.
//
// Recv and Send are raw system calls (no entersyscall/exitsyscall): the
// socket is non-blocking and both pass MSG_DONTWAIT, so they never block.
// The runtime's bookkeeping of a system call cost a few percent of a
// busy shard, and a shard seen in a system call by the runtime's monitor
// is a P the monitor takes back and hands off, waking every 20 µs to do
// so (router.reserveProcs has the rest of that story).
func (c *Conn) Recv(b *Batch, n int) (int, error) {
	n = min(n, len(b.msgs))
	for i := range n {
		buf := b.Bufs[i]
		b.iovs[i].Base = unsafe.SliceData(buf)
		b.iovs[i].SetLen(len(buf))
		h := &b.msgs[i].Hdr
		*h = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&b.names[i])), Namelen: unix.SizeofSockaddrInet6, Iov: &b.iovs[i], Iovlen: 1}
		if c.gro || c.pktinfo {
			h.Control = &b.ctrl[i*ctrlLen]
			h.SetControllen(ctrlLen)
		}
	}
	for {
		r, _, errno := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&b.msgs[0])), uintptr(n), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		default:
			return 0, os.NewSyscallError("recvmmsg", errno)
		}
		got := int(r)
		for i := range got {
			b.Sizes[i] = int(b.msgs[i].Len)
			b.Addrs[i] = fromRaw(&b.names[i])
			b.Seg[i], b.Local[i] = 0, netip.Addr{}
			if c.gro || c.pktinfo {
				b.Seg[i], b.Local[i] = parseCtrl(b.ctrl[i*ctrlLen:(i+1)*ctrlLen], int(b.msgs[i].Hdr.Controllen))
			}
		}
		return got, nil
	}
}

// Send sends b.Bufs[i][:b.Sizes[i]] to b.Addrs[i] for i < n, sets b.Sent[i]
// for each datagram the kernel took and returns how many it took; the
// caller drops and counts the rest. A datagram refused for itself (its
// destination unreachable or invalid, too large) is skipped and the rest of
// the batch still goes; a full socket buffer (EAGAIN, ENOBUFS) leaves the
// rest unsent. The error is the last refusal's, if any: a bare unix.Errno,
// so a refused datagram costs no allocation.
//
// With UDP GSO on, each run of datagrams of one size to one destination (a
// shorter one ends a run) goes as one message with a UDP_SEGMENT control
// message: one pass through the stack for up to 64 datagrams. The kernel
// refuses a GSO message whole, never part of it (EMSGSIZE when the path MTU
// shrank below the segments, EIO where the path cannot do GSO, EINVAL on
// some kernels for either): the rest of the batch then goes one datagram a
// message, so nothing is lost, and gsoRefused decides whether GSO stays on.
func (c *Conn) Send(b *Batch, n int) (int, error) {
	n = min(n, len(b.msgs))
	for i := range n {
		b.iovs[i].Base = unsafe.SliceData(b.Bufs[i])
		b.iovs[i].SetLen(b.Sizes[i])
		b.Sent[i] = false
	}
	sent := 0
	var refused error
	b.LocalGone = netip.Addr{}
	retried := -1 // a message resent without its local address
	gso := c.gso.Load()
	failFirst, failLen, failErr := -1, 0, unix.Errno(0)
	for start := 0; start < n; {
		m := c.buildSend(b, start, n, gso)
		start = n
	send:
		for next := 0; next < m; {
			r, _, errno := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&b.msgs[next])), uintptr(m-next), unix.MSG_DONTWAIT, 0, 0)
			switch errno {
			case 0:
				if r == 0 {
					return sent, refused // cannot happen for m > next; never spin
				}
				for k := next; k < next+int(r); k++ {
					for i := b.first[k]; i < b.first[k]+int(b.msgs[k].Hdr.Iovlen); i++ {
						b.Sent[i] = true
						sent++
					}
				}
				if retried == next {
					// Refused with its local address, taken without:
					// the address is gone.
					b.LocalGone = b.Local[b.first[next]]
				}
				next += int(r)
				continue
			case unix.EINTR:
				continue
			case unix.EAGAIN, unix.ENOBUFS:
				return sent, refused
			}
			if b.info[next] && localRefused(errno) {
				// The source asked for may not be ours any more: try
				// from the routing table's choice.
				retried = next
				b.info[next] = false
				if h := &b.msgs[next].Hdr; int(h.Iovlen) > 1 {
					h.SetControllen(unix.CmsgSpace(2)) // the segment size, which comes first
				} else {
					h.Control = nil
					h.SetControllen(0)
				}
				continue
			}
			if l := int(b.msgs[next].Hdr.Iovlen); l > 1 {
				failFirst, failLen, failErr = b.first[next], l, errno
				gso, start = false, b.first[next]
				break send
			}
			// sendmmsg reports an error only when it sent nothing: the
			// first message failed on its own (e.g. EHOSTUNREACH,
			// ECONNREFUSED from an ICMP, EINVAL for port 0). Skip it.
			refused = errno
			next++
		}
	}
	if failFirst >= 0 {
		c.gsoRefused(failErr, b.Sent[failFirst:failFirst+failLen])
	}
	return sent, refused
}

// buildSend fills the message headers for datagrams [start, n), as GSO
// runs if gso, and returns how many messages it made.
func (c *Conn) buildSend(b *Batch, start, n int, gso bool) int {
	m := 0
	for i := start; i < n; m++ {
		j := i + 1
		if gso {
			size, total := b.Sizes[i], b.Sizes[i]
			for j < n && j-i < maxGSOSegments && b.Addrs[j] == b.Addrs[i] && b.Local[j] == b.Local[i] &&
				b.Sizes[j] <= size && total+b.Sizes[j] <= maxGSOBytes {
				total += b.Sizes[j]
				j++
				if b.Sizes[j-1] < size {
					break // a shorter datagram ends the run
				}
			}
		}
		nl := toRaw(&b.names[m], b.Addrs[i], c.v6)
		h := &b.msgs[m].Hdr
		*h = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&b.names[m])), Namelen: nl, Iov: &b.iovs[i]}
		h.SetIovlen(j - i)
		ctrl, cl := b.ctrl[m*ctrlLen:(m+1)*ctrlLen], 0
		if j-i > 1 {
			setSegment(ctrl, b.Sizes[i])
			cl = unix.CmsgSpace(2)
		}
		b.info[m] = false
		if c.pktinfo && sendableFrom(b.Local[i], b.Addrs[i]) {
			cl += c.putPktinfo(ctrl[cl:], b.Local[i])
			b.info[m] = true
		}
		if cl > 0 {
			h.Control = &ctrl[0]
			h.SetControllen(cl)
		}
		b.first[m] = i
		i = j
	}
	return m
}

func fromRaw(rs *unix.RawSockaddrInet6) netip.AddrPort {
	switch rs.Family {
	case unix.AF_INET:
		r4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(rs))
		p := (*[2]byte)(unsafe.Pointer(&r4.Port))
		return netip.AddrPortFrom(netip.AddrFrom4(r4.Addr), binary.BigEndian.Uint16(p[:]))
	case unix.AF_INET6:
		// Unmapped: an IPv4 peer on a dual-stack socket is the same peer
		// as on an IPv4 socket (lane lookup, cookies, rate limits).
		p := (*[2]byte)(unsafe.Pointer(&rs.Port))
		return netip.AddrPortFrom(netip.AddrFrom16(rs.Addr).Unmap(), binary.BigEndian.Uint16(p[:]))
	}
	return netip.AddrPort{}
}

func toRaw(rs *unix.RawSockaddrInet6, ap netip.AddrPort, v6 bool) uint32 {
	port := ap.Port()
	if !v6 {
		r4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(rs))
		*r4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ap.Addr().Unmap().As4()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&r4.Port))[:], port)
		return unix.SizeofSockaddrInet4
	}
	*rs = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ap.Addr().As16()}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&rs.Port))[:], port)
	return unix.SizeofSockaddrInet6
}
