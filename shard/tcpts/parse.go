package tcpts

import (
	"encoding/binary"

	"github.com/yip-router/yip-router/shard/offload"
)

// TCP constants the table reads.
const (
	tcpLen    = 20
	protoTCP  = 6
	tcpCsum   = 16 // checksum's offset in the TCP header
	optEnd    = 0
	optNOP    = 1
	optTS     = 8 // timestamps (RFC 7323)
	optTSLen  = 10
	optAO     = 29 // TCP-AO (RFC 5925): its MAC covers the options
	tcpSYN    = 0x02
	tcpRST    = 0x04
	ipv4Frags = 0x3fff // more-fragments flag and fragment offset
)

// parse reads pkt, one whole packet as delivered: its flow, sequence
// number, payload length and flags, and where its TSval is. ok is false
// for anything but a TCP segment with one well-formed timestamp option:
// not TCP (offload.Transport), an IPv4 fragment, a header that does not
// fit, malformed options, no timestamps, or TCP-AO, whose MAC would no
// longer verify if the TSval changed (TCP-MD5's leaves the options out).
func parse(pkt []byte) (g seg, ok bool) {
	off, proto, v6, ok := offload.Transport(pkt)
	if !ok || proto != protoTCP || !v6 && binary.BigEndian.Uint16(pkt[6:])&ipv4Frags != 0 {
		return g, false
	}
	g.tcp, g.key.v6 = off, v6
	if v6 {
		copy(g.key.src[:], pkt[8:24])
		copy(g.key.dst[:], pkt[24:40])
	} else {
		copy(g.key.src[12:], pkt[12:16])
		copy(g.key.dst[12:], pkt[16:20])
	}
	if len(pkt) < off+tcpLen {
		return g, false
	}
	th := pkt[off:]
	doff := int(th[12]>>4) * 4
	if doff < tcpLen+optTSLen || doff > len(th) {
		return g, false
	}
	g.key.ports = binary.BigEndian.Uint32(th)
	g.seq, g.n, g.flags = binary.BigEndian.Uint32(th[4:]), uint32(len(th)-doff), th[13]
	opts := th[tcpLen:doff]
	for i := 0; i < len(opts); {
		switch opts[i] {
		case optEnd:
			return g, g.tsval != 0
		case optNOP:
			i++
			continue
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
			return g, false // malformed: the host ignores the rest too
		}
		switch opts[i] {
		case optAO:
			return g, false
		case optTS:
			if opts[i+1] != optTSLen || g.tsval != 0 {
				return g, false
			}
			g.tsval = off + tcpLen + i + 2
		}
		i += int(opts[i+1])
	}
	return g, g.tsval != 0
}

// setTSval writes ts as pkt's TSval and updates the TCP checksum by the
// difference (offload.Update), over the 16-bit words of the TCP segment
// the four bytes fall in: the option may start at an odd offset.
func setTSval(pkt []byte, g seg, ts uint32) {
	from := g.tcp + ((g.tsval - g.tcp) &^ 1) // first word touched
	to := g.tcp + ((g.tsval - g.tcp + 4 + 1) &^ 1)
	var old [6]byte
	n := copy(old[:], pkt[from:to])
	binary.BigEndian.PutUint32(pkt[g.tsval:], ts)
	cs := pkt[g.tcp+tcpCsum:]
	binary.BigEndian.PutUint16(cs, offload.Update(binary.BigEndian.Uint16(cs), old[:n], pkt[from:to]))
}
