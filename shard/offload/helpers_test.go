package offload

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// pktSpec describes a hand-built TCP or UDP packet for the tests.
type pktSpec struct {
	v6           bool
	udp          bool
	src, dst     netip.Addr
	sport, dport uint16
	seq, ack     uint32
	flags        uint8
	tos, ttl     uint8
	id           uint16
	df           bool
	flowLabel    uint32
	opts         []byte // TCP options (multiple of 4)
	ipOpts       []byte // IPv4 options (multiple of 4)
	window       uint16
	payload      []byte
}

func defSpec(v6, udp bool) pktSpec {
	s := pktSpec{v6: v6, udp: udp, sport: 40000, dport: 5201, seq: 1000, ack: 77, flags: tcpACK,
		ttl: 64, id: 100, df: true, window: 512}
	if v6 {
		s.src, s.dst = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	} else {
		s.src, s.dst = netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	}
	return s
}

// build makes the packet with every checksum valid.
func (s pktSpec) build() []byte {
	ipl := ipv4Len + len(s.ipOpts)
	if s.v6 {
		ipl = ipv6Len
	}
	tl := tcpLen + len(s.opts)
	if s.udp {
		tl = udpLen
	}
	n := ipl + tl + len(s.payload)
	b := make([]byte, n)
	if s.v6 {
		binary.BigEndian.PutUint32(b, 6<<28|uint32(s.tos)<<20|s.flowLabel&0xfffff)
		binary.BigEndian.PutUint16(b[4:], uint16(n-ipv6Len))
		b[6] = protoTCP
		if s.udp {
			b[6] = protoUDP
		}
		b[7] = s.ttl
		a, d := s.src.As16(), s.dst.As16()
		copy(b[8:], a[:])
		copy(b[24:], d[:])
	} else {
		b[0] = 0x40 | byte(ipl/4)
		b[1] = s.tos
		binary.BigEndian.PutUint16(b[2:], uint16(n))
		binary.BigEndian.PutUint16(b[4:], s.id)
		if s.df {
			b[6] = 0x40
		}
		b[8] = s.ttl
		b[9] = protoTCP
		if s.udp {
			b[9] = protoUDP
		}
		a, d := s.src.As4(), s.dst.As4()
		copy(b[12:], a[:])
		copy(b[16:], d[:])
		copy(b[20:], s.ipOpts)
		setIPv4Csum(b, ipl)
	}
	t := b[ipl:]
	binary.BigEndian.PutUint16(t, s.sport)
	binary.BigEndian.PutUint16(t[2:], s.dport)
	copy(t[tl:], s.payload)
	ip, _ := parseIP(b)
	if s.udp {
		binary.BigEndian.PutUint16(t[4:], uint16(len(t)))
		c := ^fold(sum(t, pseudoSum(b, s.v6, protoUDP, len(t))))
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(t[6:], c)
	} else {
		binary.BigEndian.PutUint32(t[4:], s.seq)
		binary.BigEndian.PutUint32(t[8:], s.ack)
		t[12] = byte(tl/4) << 4
		t[13] = s.flags
		binary.BigEndian.PutUint16(t[14:], s.window)
		copy(t[tcpLen:], s.opts)
		binary.BigEndian.PutUint16(t[16:], ^fold(sum(t, pseudoSum(b, s.v6, protoTCP, len(t)))))
	}
	_ = ip
	return b
}

func payload(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*7)
	}
	return p
}

// checkValid fails the test unless pkt's IP length, IPv4 header checksum
// and transport checksum are all right.
func checkValid(t *testing.T, pkt []byte) {
	t.Helper()
	ip, ok := parseIP(pkt)
	if !ok {
		t.Fatalf("unparsable packet % x", pkt[:min(len(pkt), 40)])
	}
	if !ipLenOK(pkt, ip) {
		t.Fatalf("IP length field disagrees with %d bytes", len(pkt))
	}
	if ip.v6 {
		if ip, ok = skipIPv6Ext(pkt, ip); !ok {
			t.Fatal("unreadable IPv6 extension headers")
		}
	}
	if !ip.v6 && Checksum(pkt[:ip.hlen]) != 0 {
		t.Fatalf("IPv4 header checksum does not verify")
	}
	if !transportValid(pkt, ip.v6, ip.proto, ip.hlen) {
		t.Fatalf("transport checksum does not verify")
	}
}

// superpacket builds what the kernel hands a TUN reader for a TSO/USO
// send: one packet carrying all of payload, with the transport checksum
// field holding the pseudo-header sum (NEEDS_CSUM).
func superpacket(s pktSpec, gso int) (Hdr, []byte) {
	b := s.build()
	ip, _ := parseIP(b)
	t := b[ip.hlen:]
	h := Hdr{Flags: FlagNeedsCsum, GSOSize: uint16(gso), CsumStart: uint16(ip.hlen)}
	if s.udp {
		h.GSOType, h.CsumOffset = GSOUDPL4, udpCsumOff
		h.HdrLen = uint16(ip.hlen + udpLen)
		binary.BigEndian.PutUint16(t[6:], fold(pseudoSum(b, s.v6, protoUDP, len(t))))
	} else {
		h.GSOType, h.CsumOffset = GSOTCPv4, tcpCsumOff
		if s.v6 {
			h.GSOType = GSOTCPv6
		}
		h.HdrLen = uint16(ip.hlen + tcpLen + len(s.opts))
		binary.BigEndian.PutUint16(t[16:], fold(pseudoSum(b, s.v6, protoTCP, len(t))))
	}
	return h, b
}
