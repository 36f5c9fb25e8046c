package tcpts

import "encoding/binary"

// Header constants: IP and TCP as the router carries them.
const (
	ipv4Len   = 20
	ipv6Len   = 40
	tcpLen    = 20
	protoTCP  = 6
	tcpCsum   = 16 // checksum's offset in the TCP header
	optTS     = 8  // TCP option kind: timestamps
	optTSLen  = 10
	optEnd    = 0
	optNOP    = 1
	tcpSYN    = 0x02
	tcpRST    = 0x04
	ipv4Frags = 0x3fff // more-fragments flag and fragment offset
)

// parse finds pkt's TCP timestamp option, sequence number and payload
// length (pkt is one whole packet as delivered). ok is false for anything
// else:
// not IPv4 or IPv6 with TCP right after the fixed header (IPv6 extension
// headers are not followed), a fragment, a SYN (whose TSval starts the
// connection's) or RST, a header that does not fit, or no timestamps.
func parse(pkt []byte) (o seg, ok bool) {
	if len(pkt) < ipv4Len {
		return o, false
	}
	switch pkt[0] >> 4 {
	case 4:
		hl := int(pkt[0]&0x0f) * 4
		if hl < ipv4Len || pkt[9] != protoTCP || binary.BigEndian.Uint16(pkt[6:])&ipv4Frags != 0 {
			return o, false
		}
		o.tcp = hl
		copy(o.key.src[12:], pkt[12:16])
		copy(o.key.dst[12:], pkt[16:20])
	case 6:
		if len(pkt) < ipv6Len || pkt[6] != protoTCP {
			return o, false
		}
		o.tcp, o.key.v6 = ipv6Len, true
		copy(o.key.src[:], pkt[8:24])
		copy(o.key.dst[:], pkt[24:40])
	default:
		return o, false
	}
	if len(pkt) < o.tcp+tcpLen {
		return o, false
	}
	th := pkt[o.tcp:]
	doff := int(th[12]>>4) * 4
	if doff < tcpLen+optTSLen || doff > len(th) || th[13]&(tcpSYN|tcpRST) != 0 {
		return o, false
	}
	o.key.ports = binary.BigEndian.Uint32(th)
	o.seq, o.n = binary.BigEndian.Uint32(th[4:]), uint32(len(th)-doff)
	opts := th[tcpLen:doff]
	for i := 0; i < len(opts); {
		switch opts[i] {
		case optEnd:
			return o, false
		case optNOP:
			i++
			continue
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
			return o, false // malformed: the host ignores the rest too
		}
		if opts[i] == optTS {
			if opts[i+1] != optTSLen {
				return o, false
			}
			o.tsval = o.tcp + tcpLen + i + 2
			return o, true
		}
		i += int(opts[i+1])
	}
	return o, false
}

// setTSval writes ts as pkt's TSval and updates the TCP checksum by the
// difference (RFC 1624), over the 16-bit words of the TCP segment the
// four bytes fall in: the option may start at an odd offset.
func setTSval(pkt []byte, o seg, ts uint32) {
	from := o.tcp + (o.tsval-o.tcp)&^1 // first word touched
	to := o.tcp + (o.tsval-o.tcp+4+1)&^1
	old := wordSum(pkt[from:to])
	binary.BigEndian.PutUint32(pkt[o.tsval:], ts)
	cs := pkt[o.tcp+tcpCsum:]
	// HC' = ~(~HC + ~m + m'), with m and m' the sums of the words.
	sum := uint32(^binary.BigEndian.Uint16(cs)) + uint32(^old) + uint32(wordSum(pkt[from:to]))
	binary.BigEndian.PutUint16(cs, ^fold(sum))
}

// wordSum is the folded one's-complement sum of b's 16-bit words (len(b)
// even).
func wordSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	return fold(s)
}

func fold(s uint32) uint16 {
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}
