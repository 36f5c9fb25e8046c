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
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// LaneBits bounds a group to 1<<LaneBits sockets. The port steering
// program (ListenGroup, used where the kernel refuses eBPF) returns
// (source port & LaneMask): a datagram from a port whose low bits are i
// reaches socket i, from any other port the kernel's hash picks.
const (
	LaneBits = 6
	LaneMask = 1<<LaneBits - 1
)

// skfNetOff is the kernel's SKF_NET_OFF: BPF loads relative to the network
// header. The reuseport program otherwise sees the skb past the UDP header.
const skfNetOff = -0x100000

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

// bufferSize is what each socket asks for (SO_RCVBUF/SO_SNDBUF); the
// kernel doubles it for its bookkeeping.
const bufferSize = 4 << 20

// setBuffers gives fd size bytes of buffer in each direction.
// SO_RCVBUFFORCE and SO_SNDBUFFORCE pass net.core.rmem_max/wmem_max
// (stock: 212992, a few milliseconds of a busy lane) and need CAP_NET_ADMIN
// in the host's user namespace, which a router creating its TUN device has
// unless it runs in an unprivileged container (a user namespace of its
// own); there the plain options give what the host's maximum allows
// (tuning/ raises it). The sizes are best effort: a smaller buffer drops
// bursts (counted as kernel socket drops), it does not stop the router.
func setBuffers(fd, size int) {
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], size) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], size)
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
	return rcv, snd, rcv < 2*bufferSize || snd < 2*bufferSize
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
	setBuffers(fd, bufferSize)
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

// steeringProgram returns (UDP source port & LaneMask). If that is not
// below the group's size the kernel falls back to its hash, which is fine
// for handshakes (any shard may take them). The UDP header follows an
// IPv4 header without options (20 bytes) or an IPv6 header without
// extension headers (40); a dual-stack group reads the IP version first.
func steeringProgram(v6, dual bool) ([]unix.SockFilter, error) {
	const v4Len, v6Len = 20, 40
	net := int32(skfNetOff) // loads are relative to the network header
	port := func(ipLen int32) []bpf.Instruction {
		return []bpf.Instruction{
			bpf.LoadAbsolute{Off: uint32(net + ipLen), Size: 2},
			bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: LaneMask},
			bpf.RetA{},
		}
	}
	var prog []bpf.Instruction
	switch {
	case dual:
		prog = append(prog,
			bpf.LoadAbsolute{Off: uint32(net), Size: 1},
			bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 6, SkipTrue: 3},
		)
		prog = append(append(prog, port(v4Len)...), port(v6Len)...)
	case v6:
		prog = port(v6Len)
	default:
		prog = port(v4Len)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, err
	}
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return f, nil
}

// NoIPv6 reports whether err says the kernel has no IPv6 (booted with
// ipv6.disable=1), so a caller that asked for :: can fall back to IPv4.
func NoIPv6(err error) bool { return errors.Is(err, unix.EAFNOSUPPORT) }

// ListenGroup binds n sockets to local in one SO_REUSEPORT group and
// attaches the port steering program, so a datagram whose source port's
// low LaneBits bits are i < n reaches socket i (the kernel numbers sockets
// in the order they joined). local's port 0 picks a free port for all.
// Routers steer by lane remote instead (ListenSteered) and use this when
// the kernel refuses eBPF.
func ListenGroup(local netip.AddrPort, n int) ([]*Conn, error) {
	return listenGroup(local, n, nil)
}

// ListenSteered binds like ListenGroup but steers by st's lane map: n lane
// sockets, then n strangers' sockets (steer_linux.go) with a receive
// buffer of strangerBuffer.
func ListenSteered(local netip.AddrPort, n int, st *Steering) (lanes, strangers []*Conn, err error) {
	conns, err := listenGroup(local, n, st)
	if err != nil {
		return nil, nil, err
	}
	return conns[:n], conns[n:], nil
}

// strangerBuffer is a strangers' socket's receive buffer: a few
// milliseconds of handshakes and roaming peers' first datagrams. A flood
// overflows it (counted as its kernel drops) instead of taking a lane
// socket's buffer or the shard's time.
const strangerBuffer = 256 << 10

func listenGroup(local netip.AddrPort, n int, st *Steering) ([]*Conn, error) {
	if n < 1 || n > 1<<LaneBits {
		return nil, fmt.Errorf("udp: group of %d sockets out of range 1..%d", n, 1<<LaneBits)
	}
	// SO_REUSEPORT would let a second router (same user) silently join a
	// port another one is using and split its traffic: refuse a port that
	// a plain socket cannot bind.
	if local.Port() != 0 {
		probe, err := newSocket(local, false)
		if err != nil {
			if errors.Is(err, unix.EADDRINUSE) {
				return nil, fmt.Errorf("udp: port %d is already in use (another yip-router or program): %w", local.Port(), err)
			}
			return nil, err
		}
		probe.Close()
	}
	var conns []*Conn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	total := n
	if st != nil {
		total = 2 * n // and the strangers' sockets
	}
	for i := range total {
		c, err := newSocket(local, true)
		if err != nil {
			closeAll()
			if errors.Is(err, unix.EADDRINUSE) {
				return nil, fmt.Errorf("udp: port %d is in use by another program: %w", local.Port(), err)
			}
			return nil, err
		}
		if i == 0 {
			local = c.local // port 0: every socket joins the port the first got
		}
		if i >= n {
			_ = unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, strangerBuffer)
		}
		if st != nil {
			if err := st.attach(c, i); err != nil {
				c.Close()
				closeAll()
				return nil, fmt.Errorf("udp %s: %w", local, err)
			}
		} else if i == 0 {
			prog, err := steeringProgram(c.v6, c.dual)
			if err != nil {
				c.Close()
				return nil, err
			}
			fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
			if err := unix.SetsockoptSockFprog(c.fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fp); err != nil {
				c.Close()
				return nil, fmt.Errorf("udp %s: SO_ATTACH_REUSEPORT_CBPF: %w", local, err)
			}
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// ListenLane binds a socket on ip to a port the kernel picks from its
// ephemeral range, as it would for any client: a peer steering by lane
// remote (ListenSteered) learns the port from the lane offer, so the port
// itself carries nothing.
func ListenLane(ip netip.Addr) (*Conn, error) {
	c, err := newSocket(netip.AddrPortFrom(ip, 0), false)
	if err != nil {
		return nil, fmt.Errorf("udp: lane socket on %s: %w", ip, err)
	}
	return c, nil
}

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
