package offload

import (
	"encoding/binary"
	"errors"
)

// Errors of Splitter.Reset: each is a TUN read the shard drops and counts.
var (
	ErrGSOType    = errors.New("offload: unsupported GSO type")
	ErrBadPacket  = errors.New("offload: headers do not match the GSO type")
	ErrCsumBounds = errors.New("offload: partial checksum outside the packet")
	ErrSegSize    = errors.New("offload: segment larger than the output buffer")
)

// Splitter cuts one TUN read into plain IP packets: a superpacket (TSO or
// USO) into segments with their headers fixed and full checksums, a single
// packet with a partial checksum into one packet with it completed, and
// anything else into itself. Reset, then Next until it says done; the
// packet passed to Reset must stay untouched meanwhile.
type Splitter struct {
	pkt     []byte
	ip      ipInfo
	hdrLen  int // IP + transport header length, recomputed
	gsoSize int
	csum    int  // GSONone: partial checksum's offset in pkt, or -1
	cstart  int  // GSONone: where that checksum's coverage starts
	tcp     bool // segmenting TCP (else UDP)
	whole   bool // one packet out, as read (after the checksum fix)
	off     int  // payload bytes already emitted
	seg     int  // segments already emitted
	seq     uint32
	id      uint16
	done    bool
}

// Reset prepares to split pkt (the bytes after the virtio-net header h).
// It never trusts h.HdrLen: header lengths come from the packet itself.
func (s *Splitter) Reset(h Hdr, pkt []byte) error {
	*s = Splitter{pkt: pkt, csum: -1}
	gso := h.GSOType &^ GSOECN
	if gso == GSONone {
		s.whole = true
		if h.Flags&FlagNeedsCsum != 0 {
			start, at := int(h.CsumStart), int(h.CsumStart)+int(h.CsumOffset)
			if at+2 > len(pkt) || start >= len(pkt) {
				return ErrCsumBounds
			}
			s.csum, s.cstart = at, start
		}
		return nil
	}
	ip, ok := parseIP(pkt)
	if !ok || !ipLenOK(pkt, ip) {
		// A length field shorter than the read would turn trailing
		// bytes into payload with fresh, valid checksums.
		return ErrBadPacket
	}
	if ip.v6 {
		if ip, ok = skipIPv6Ext(pkt, ip); !ok {
			return ErrBadPacket
		}
	}
	switch {
	case gso == GSOTCPv4 && !ip.v6 && ip.proto == protoTCP,
		gso == GSOTCPv6 && ip.v6 && ip.proto == protoTCP:
		s.tcp = true
		if ip.hlen+tcpLen > len(pkt) {
			return ErrBadPacket
		}
		th := int(pkt[ip.hlen+12]>>4) * 4
		if th < tcpLen || ip.hlen+th > len(pkt) {
			return ErrBadPacket
		}
		s.hdrLen = ip.hlen + th
		s.seq = binary.BigEndian.Uint32(pkt[ip.hlen+4:])
	case gso == GSOUDPL4 && ip.proto == protoUDP:
		if ip.hlen+udpLen > len(pkt) {
			return ErrBadPacket
		}
		s.hdrLen = ip.hlen + udpLen
	case gso == GSOTCPv4, gso == GSOTCPv6, gso == GSOUDPL4:
		return ErrBadPacket
	default:
		return ErrGSOType
	}
	if h.GSOSize == 0 {
		return ErrBadPacket
	}
	s.ip, s.gsoSize = ip, int(h.GSOSize)
	if !ip.v6 {
		s.id = binary.BigEndian.Uint16(pkt[4:])
	}
	return nil
}

// Next writes the next packet into dst and returns its length; ok is false
// when there is none left. A segment that does not fit dst is an error
// (the device's MTU is larger than the shard's buffers).
func (s *Splitter) Next(dst []byte) (n int, ok bool, err error) {
	if s.done {
		return 0, false, nil
	}
	if s.whole {
		s.done = true
		if len(s.pkt) > len(dst) {
			return 0, false, ErrSegSize
		}
		n = copy(dst, s.pkt)
		if s.csum >= 0 {
			// The field holds the pseudo-header sum; the sum from
			// csum_start over the rest completes it. A result of 0 is
			// written as 0xffff, as the kernel does: for UDP, 0 would
			// mean "no checksum" (and is invalid over IPv6).
			c := Checksum(dst[s.cstart:n])
			if c == 0 {
				c = 0xffff
			}
			binary.BigEndian.PutUint16(dst[s.csum:], c)
		}
		return n, true, nil
	}
	payload := len(s.pkt) - s.hdrLen
	seg := min(s.gsoSize, payload-s.off)
	if seg < 0 {
		seg = 0
	}
	n = s.hdrLen + seg
	if n > len(dst) {
		s.done = true
		return 0, false, ErrSegSize
	}
	copy(dst, s.pkt[:s.hdrLen])
	copy(dst[s.hdrLen:], s.pkt[s.hdrLen+s.off:s.hdrLen+s.off+seg])
	last := s.off+seg >= payload
	pkt, ip := dst[:n], s.ip
	if !ip.v6 {
		binary.BigEndian.PutUint16(pkt[4:], s.id+uint16(s.seg))
	}
	setIPLen(pkt, ip, n)
	t := pkt[ip.hlen:]
	var csumAt int
	if s.tcp {
		binary.BigEndian.PutUint32(t[4:], s.seq+uint32(s.off))
		if !last {
			t[13] &^= tcpFIN | tcpPSH
		}
		if s.seg > 0 {
			t[13] &^= tcpCWR
		}
		csumAt = tcpCsumOff
	} else {
		binary.BigEndian.PutUint16(t[4:], uint16(len(t)))
		csumAt = udpCsumOff
	}
	t[csumAt], t[csumAt+1] = 0, 0
	c := ^fold(sum(t, pseudoSum(pkt, ip.v6, ip.proto, len(t))))
	if c == 0 && !s.tcp {
		c = 0xffff // zero means "no checksum" in UDP
	}
	binary.BigEndian.PutUint16(t[csumAt:], c)
	s.off += seg
	s.seg++
	s.done = last
	return n, true, nil
}

// Segments is how many packets the current Reset produces.
func (s *Splitter) Segments() int {
	if s.whole {
		return 1
	}
	payload := len(s.pkt) - s.hdrLen
	if payload <= 0 {
		return 1
	}
	return (payload + s.gsoSize - 1) / s.gsoSize
}
