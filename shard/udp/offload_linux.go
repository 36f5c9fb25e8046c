package udp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDP GSO and GRO. A shard sends runs of equal-sized datagrams to one peer
// (a TCP flow's segments through the tunnel are all MTU-sized) and the
// kernel carries each run through its stack, and over a veth or a NIC with
// UDP segmentation offload, as one packet; with GRO the receiving stack
// hands a run back as one message.

const (
	// maxGSOSegments is the kernel's UDP_MAX_SEGMENTS on every kernel
	// that has GSO (later kernels allow more).
	maxGSOSegments = 64
	// maxGSOBytes is the most UDP payload one IPv4 datagram can carry.
	maxGSOBytes = 65507
)

// ctrlLen holds a message's control messages: UDP_GRO's segment size (an
// int) on receive, UDP_SEGMENT's uint16 on send, and a local address
// (pktinfo_linux.go) either way.
var ctrlLen = unix.CmsgSpace(4) + pktinfoSpace

// EnableOffloads turns on UDP GSO (send) and GRO (receive) as asked, where
// the kernel has them and none of their known defects, and reports what it
// turned on. Call it before the shard runs. A receiving socket with GRO on
// needs 64 KB receive buffers (see Recv).
func (c *Conn) EnableOffloads(gso, gro bool) (gotGSO, gotGRO bool) {
	rel := kernelRelease()
	if gso && gsoUsable(rel) {
		// The option is readable exactly where the kernel has UDP GSO.
		if _, err := unix.GetsockoptInt(c.fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT); err == nil {
			c.gso.Store(true)
		}
	}
	if gro && groUsable(rel) {
		c.gro = unix.SetsockoptInt(c.fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
	}
	return c.gso.Load(), c.gro
}

// GSO reports whether sends use UDP GSO now (it goes off if the kernel
// refuses a GSO message). Safe from any goroutine.
func (c *Conn) GSO() bool { return c != nil && c.gso.Load() }

// GRO reports whether the socket receives UDP GRO messages.
func (c *Conn) GRO() bool { return c != nil && c.gro }

// GSOError is why GSO was turned off at run time, or nil.
func (c *Conn) GSOError() error {
	if c == nil {
		return nil
	}
	if p := c.gsoErr.Load(); p != nil {
		return *p
	}
	return nil
}

// gsoRefused decides, after the kernel refused a GSO message with errno
// and its datagrams were sent one a message (run tells which got through),
// whether GSO stays on. EIO: the path cannot do GSO, off. EINVAL: off if
// the same datagrams went through alone (the refusal was about GSO, as on
// kernels that refuse a short last segment), on if they were refused alone
// too (the destination itself is invalid). Anything else (EMSGSIZE: the
// path MTU shrank below the segments) says nothing about GSO: it stays on.
func (c *Conn) gsoRefused(errno unix.Errno, run []bool) {
	off := errno == unix.EIO
	if errno == unix.EINVAL {
		for _, ok := range run {
			off = off || ok
		}
	}
	if off && c.gso.Swap(false) {
		err := fmt.Errorf("udp %s: kernel refused a GSO send (%w): UDP GSO off", c.local, errno)
		c.gsoErr.Store(&err)
	}
}

// setSegment writes a UDP_SEGMENT control message for size-byte segments.
func setSegment(ctrl []byte, size int) {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&ctrl[0]))
	h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(ctrl[unix.CmsgLen(0):], uint16(size))
}

// kernelRelease is uname -r's version triple (0s when unreadable).
func kernelRelease() [3]int {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return [3]int{}
	}
	return parseRelease(string(u.Release[:bytes.IndexByte(u.Release[:], 0)]))
}

func parseRelease(s string) [3]int {
	var v [3]int
	k := 0
	for i := 0; i < len(s) && k < 3; i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			v[k] = v[k]*10 + int(c-'0')
		case c == '.':
			k++
		default:
			return v
		}
	}
	return v
}

func older(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// gsoUsable: kernels 7.0 to 7.1.4 mangle runs of equal-length GSO
// segments; UDP GSO arrived in 4.18.
func gsoUsable(rel [3]int) bool {
	if older(rel, [3]int{4, 18, 0}) {
		return false
	}
	return older(rel, [3]int{7, 0, 0}) || older([3]int{7, 1, 4}, rel)
}

// groUsable: UDP GRO on sockets is unreliable before 5.12.
func groUsable(rel [3]int) bool { return !older(rel, [3]int{5, 12, 0}) }

// Drops is how many datagrams the kernel dropped for this socket (a full
// receive buffer, mostly): SO_MEMINFO's drop count, 0 if unreadable.
func (c *Conn) Drops() uint64 {
	const skMeminfoDrops, skMeminfoVars = 8, 9
	var mi [skMeminfoVars]uint32
	l := uint32(unsafe.Sizeof(mi))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(c.fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mi[0])), uintptr(unsafe.Pointer(&l)), 0)
	if errno != 0 {
		return 0
	}
	return uint64(mi[skMeminfoDrops])
}
