package offload

import "encoding/binary"

// IP and transport constants used by the splitter and the coalescer.
const (
	protoTCP = 6
	protoUDP = 17

	ipv4Len = 20 // without options
	ipv6Len = 40 // fixed header; extension headers are not offloaded
	tcpLen  = 20 // without options
	udpLen  = 8

	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
	tcpURG = 0x20
	tcpECE = 0x40
	tcpCWR = 0x80

	tcpCsumOff = 16 // checksum's offset in the TCP header
	udpCsumOff = 6  // in the UDP header
)

// ipInfo is what both directions need to know of an IP packet's header.
type ipInfo struct {
	v6    bool
	hlen  int   // IP header length: where the transport header starts
	proto uint8 // transport protocol (no IPv6 extension headers)
}

// parseIP reads the IP header of pkt. ok is false for anything that is not
// a well-formed IPv4 or IPv6 header within pkt.
func parseIP(pkt []byte) (ipInfo, bool) {
	if len(pkt) < ipv4Len {
		return ipInfo{}, false
	}
	switch pkt[0] >> 4 {
	case 4:
		hl := int(pkt[0]&0x0f) * 4
		if hl < ipv4Len || hl > len(pkt) {
			return ipInfo{}, false
		}
		return ipInfo{hlen: hl, proto: pkt[9]}, true
	case 6:
		if len(pkt) < ipv6Len {
			return ipInfo{}, false
		}
		return ipInfo{v6: true, hlen: ipv6Len, proto: pkt[6]}, true
	}
	return ipInfo{}, false
}

// setIPLen writes the packet length n into pkt's IP header, and for IPv4
// its header checksum.
func setIPLen(pkt []byte, ip ipInfo, n int) {
	if ip.v6 {
		binary.BigEndian.PutUint16(pkt[4:], uint16(n-ipv6Len))
		return
	}
	binary.BigEndian.PutUint16(pkt[2:], uint16(n))
	setIPv4Csum(pkt, ip.hlen)
}

func setIPv4Csum(pkt []byte, hlen int) {
	pkt[10], pkt[11] = 0, 0
	binary.BigEndian.PutUint16(pkt[10:], Checksum(pkt[:hlen]))
}

// ipLenOK reports whether the IP header's length field agrees with len(pkt).
func ipLenOK(pkt []byte, ip ipInfo) bool {
	if ip.v6 {
		return int(binary.BigEndian.Uint16(pkt[4:]))+ipv6Len == len(pkt)
	}
	return int(binary.BigEndian.Uint16(pkt[2:])) == len(pkt)
}

// IPv6 extension headers the splitter walks: hop-by-hop and destination
// options carry no address the pseudo-header uses. A routing header
// changes the pseudo-header's destination and a fragment header ends
// segmentation, so packets with those are refused.
const (
	ipv6HopByHop = 0
	ipv6DstOpts  = 60
	maxExtHdrs   = 4
)

// skipIPv6Ext moves ip past hop-by-hop and destination-options headers to
// the transport header; ok is false if they run past pkt or nest too deep.
func skipIPv6Ext(pkt []byte, ip ipInfo) (ipInfo, bool) {
	for range maxExtHdrs {
		if ip.proto != ipv6HopByHop && ip.proto != ipv6DstOpts {
			return ip, true
		}
		if ip.hlen+8 > len(pkt) {
			return ip, false
		}
		ip.proto = pkt[ip.hlen]
		ip.hlen += (int(pkt[ip.hlen+1]) + 1) * 8
		if ip.hlen > len(pkt) {
			return ip, false
		}
	}
	return ip, ip.proto != ipv6HopByHop && ip.proto != ipv6DstOpts
}

// Transport finds pkt's transport header: its offset and protocol, and
// whether pkt is IPv6 (whose hop-by-hop and destination-options headers it
// skips). ok is false for anything that is not a well-formed IPv4 or IPv6
// header within pkt. It does not look at IPv4 fragmentation.
func Transport(pkt []byte) (off int, proto uint8, v6, ok bool) {
	ip, ok := parseIP(pkt)
	if ok && ip.v6 {
		ip, ok = skipIPv6Ext(pkt, ip)
	}
	return ip.hlen, ip.proto, ip.v6, ok
}
