// Package offload turns the TUN device's offload formats into plain IP
// packets and back: a virtio-net header in front of every TUN read or
// write, TSO/USO superpackets split into MTU-sized segments (egress), and
// segments of one flow coalesced into one superpacket (ingress, GRO).
//
// A userspace tunnel without offloads pays one TUN syscall and one pass of
// the inner TCP stack per 1.4 KB packet; with them a syscall carries up to
// 64 KB. Nothing here does I/O or allocates per packet: the shard owns one
// Splitter and one Coalescer and feeds them its own buffers.
package offload

import (
	"encoding/binary"
	"errors"
)

// HdrLen is the size of struct virtio_net_hdr, the prefix of every TUN
// read and write on a device opened with IFF_VNET_HDR.
const HdrLen = 10

// Header flags and GSO types (linux/virtio_net.h).
const (
	FlagNeedsCsum = 1 // the checksum at CsumStart+CsumOffset is partial

	GSONone  = 0
	GSOTCPv4 = 1
	GSOUDP   = 3 // UFO, never negotiated here
	GSOTCPv6 = 4
	GSOUDPL4 = 5
	GSOECN   = 0x80 // TCP with CWR on the first segment
)

// MaxPacket is the largest IP packet a superpacket may be (IPv4 total
// length and IPv6 payload length are 16 bits).
const MaxPacket = 65535

// Hdr is a decoded virtio_net_hdr, in the host's byte order: what a TUN
// device uses unless told otherwise (TUNSETVNETLE/BE are not used).
type Hdr struct {
	Flags      uint8
	GSOType    uint8
	HdrLen     uint16 // not trusted: the splitter recomputes it
	GSOSize    uint16
	CsumStart  uint16
	CsumOffset uint16
}

// ErrShortHdr is a TUN read shorter than the virtio-net header.
var ErrShortHdr = errors.New("offload: read shorter than the virtio-net header")

// DecodeHdr reads the header at the front of b.
func DecodeHdr(b []byte) (Hdr, error) {
	if len(b) < HdrLen {
		return Hdr{}, ErrShortHdr
	}
	return Hdr{
		Flags:      b[0],
		GSOType:    b[1],
		HdrLen:     binary.NativeEndian.Uint16(b[2:]),
		GSOSize:    binary.NativeEndian.Uint16(b[4:]),
		CsumStart:  binary.NativeEndian.Uint16(b[6:]),
		CsumOffset: binary.NativeEndian.Uint16(b[8:]),
	}, nil
}

// Encode writes h into b[:HdrLen].
func (h Hdr) Encode(b []byte) {
	_ = b[HdrLen-1]
	b[0], b[1] = h.Flags, h.GSOType
	binary.NativeEndian.PutUint16(b[2:], h.HdrLen)
	binary.NativeEndian.PutUint16(b[4:], h.GSOSize)
	binary.NativeEndian.PutUint16(b[6:], h.CsumStart)
	binary.NativeEndian.PutUint16(b[8:], h.CsumOffset)
}
