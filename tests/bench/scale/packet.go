package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/yip-router/yip-router/crypto"
)

// Addressing. Simulated peer i (0-based) has the underlay address
// 100.64.0.0 + i*256 + 1, alone in its /24 so the hub's per-/24 handshake
// buckets do not throttle the test, and the inner address 10.100.0.0 + i +
// 1 (AllowedIPs = that /32). The hub's inner address is 10.99.0.1/16,
// outside every peer's AllowedIPs.
var (
	underlayBase = netip.MustParseAddr("100.64.0.0")
	underlayNet  = netip.MustParsePrefix("100.64.0.0/10")
	innerBase    = netip.MustParseAddr("10.100.0.0")
	hubInner     = netip.MustParsePrefix("10.99.0.1/16")
	// reloadInner is what the reload test moves peer 0's AllowedIPs to.
	reloadInner = netip.MustParsePrefix("10.101.0.1/32")
)

// maxPeers is how many /24s 100.64.0.0/10 holds (and so how many peers
// get one each); the inner /16 holds more.
const maxPeers = 1 << (32 - 10 - 8)

// genPort is every simulated peer's UDP port. A hub steering by lane
// remote (eBPF) puts a source it has no lane for on a shard by the
// kernel's hash, whatever the port; under the port-steering fallback the
// port's low 6 bits (shard/udp.LaneBits), 0 here, pick hub shard 0.
const genPort = 40000

func addAddr(base netip.Addr, off uint32) netip.Addr {
	b := base.As4()
	v := binary.BigEndian.Uint32(b[:]) + off
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// underlayAddr is peer i's underlay (source) address.
func underlayAddr(i int) netip.Addr { return addAddr(underlayBase, uint32(i)*256+1) }

// innerAddr is peer i's inner address (its AllowedIPs /32).
func innerAddr(i int) netip.Addr { return addAddr(innerBase, uint32(i)+1) }

// peerPort is peer i's UDP port: genPort, or with spread the port whose
// low bits are i mod shards (so a port-steering hub's shards share the
// handshakes).
func peerPort(i, shards int, spread bool) uint16 {
	if spread && shards > 1 {
		return genPort + uint16(i%shards)
	}
	return genPort
}

// hubConfig is the hub's configuration: [Interface] and one [Peer] per
// public key, peer i with AllowedIPs innerAddr(i)/32 (or override[i]).
func hubConfig(name string, priv crypto.PrivateKey, port uint16, metrics string, pubs []crypto.PublicKey, override map[int]netip.Prefix) []byte {
	var b bytes.Buffer
	b.Grow(100 + len(pubs)*110)
	fmt.Fprintf(&b, "[Interface]\nName = %s\nPrivateKey = %s\nListenPort = %d\nAddress = %s\n", name, priv, port, hubInner)
	if metrics != "" {
		fmt.Fprintf(&b, "MetricsListen = %s\n", metrics)
	}
	for i, pub := range pubs {
		allowed := netip.PrefixFrom(innerAddr(i), 32)
		if p, ok := override[i]; ok {
			allowed = p
		}
		fmt.Fprintf(&b, "\n[Peer]\nPublicKey = %s\nAllowedIPs = %s\n", pub, allowed)
	}
	return b.Bytes()
}

// checksum is the Internet checksum (RFC 1071) of b.
func checksum(b []byte) uint16 {
	var s uint32
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

const (
	ipv4HeaderLen = 20
	icmpHeaderLen = 8
	icmpEcho      = 8
	icmpEchoReply = 0
	protoICMP     = 1
)

// echoRequest writes an IPv4 ICMP echo request from src to dst with id,
// seq and payload into b (which must be large enough) and returns it.
func echoRequest(b []byte, src, dst netip.Addr, id, seq uint16, payload []byte) []byte {
	n := ipv4HeaderLen + icmpHeaderLen + len(payload)
	b = b[:n]
	ip := b[:ipv4HeaderLen]
	ip[0] = 0x45
	ip[1] = 0
	binary.BigEndian.PutUint16(ip[2:], uint16(n))
	binary.BigEndian.PutUint16(ip[4:], id^seq) // identification
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	ip[8] = 64
	ip[9] = protoICMP
	ip[10], ip[11] = 0, 0
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	ic := b[ipv4HeaderLen:]
	ic[0], ic[1], ic[2], ic[3] = icmpEcho, 0, 0, 0
	binary.BigEndian.PutUint16(ic[4:], id)
	binary.BigEndian.PutUint16(ic[6:], seq)
	copy(ic[icmpHeaderLen:], payload)
	binary.BigEndian.PutUint16(ic[2:], checksum(ic))
	return b
}

var errNotEchoReply = errors.New("not the expected ICMP echo reply")

// parseEchoReply checks that pkt is an IPv4 ICMP echo reply from src to
// dst with id and seq, with valid checksums.
func parseEchoReply(pkt []byte, src, dst netip.Addr, id, seq uint16) error {
	if len(pkt) < ipv4HeaderLen+icmpHeaderLen || pkt[0]>>4 != 4 {
		return errNotEchoReply
	}
	ihl := int(pkt[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(pkt[2:]))
	if ihl < ipv4HeaderLen || total > len(pkt) || total < ihl+icmpHeaderLen || pkt[9] != protoICMP {
		return errNotEchoReply
	}
	if checksum(pkt[:ihl]) != 0 {
		return fmt.Errorf("%w: bad IPv4 header checksum", errNotEchoReply)
	}
	s, _ := netip.AddrFromSlice(pkt[12:16])
	d, _ := netip.AddrFromSlice(pkt[16:20])
	if s != src || d != dst {
		return fmt.Errorf("%w: %s -> %s", errNotEchoReply, s, d)
	}
	ic := pkt[ihl:total]
	if checksum(ic) != 0 {
		return fmt.Errorf("%w: bad ICMP checksum", errNotEchoReply)
	}
	if ic[0] != icmpEchoReply || binary.BigEndian.Uint16(ic[4:]) != id || binary.BigEndian.Uint16(ic[6:]) != seq {
		return errNotEchoReply
	}
	return nil
}
