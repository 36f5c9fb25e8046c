// Package flood is the attacker of the flood campaign (tests/e2e,
// TestFloodCampaign) and of bench-compare's flood rows: one implementation
// of the generator, so both measure the same attack.
//
// The attacker is a namespace of its own with a veth into the receiver's
// namespace (Attach): a route from the receiver back to the spoofed
// sources, reverse-path filtering off there (an attacker next to the
// receiver can send with any source address), and a raw IPv4 socket. Send
// writes prepared packets round and round from one goroutine, as fast as
// it can, to the receiver's listen port or, for the CPU-matched baseline,
// to ClosedPort (SetPort): the same generator at the same rate with the
// same packets, so the attacker's and the kernel's CPU are the same and
// only the receiving daemon's share differs.
//
// The packets (this file, pure): Garbage (random datagrams), Spoofed
// (payloads from SpoofedSources random sources: the initiations of
// YipInitiations or WGInitiations) and Replay (datagrams a Capture took
// off the receiver's link, byte for byte). wg.go holds WireGuard's
// message layout and MACs, which bench-scale's simulated WireGuard peers
// use too.
package flood

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/crypto"
)

const (
	// SpoofNet is where the spoofed sources come from: a /10, so more
	// /24 prefixes than the receiver's limiters hold (8192).
	SpoofNet = "10.64.0.0/10"
	// SpoofedSources is how many spoofed initiations (each from its own
	// random source) a handshake flood sends round and round.
	SpoofedSources = 16384
	// ClosedPort is a UDP port nobody listens on in the receiver's
	// namespace (discard): the CPU-matched baseline's destination.
	ClosedPort = 9
	// GarbageCount is how many random datagrams Garbage prepares.
	GarbageCount = 512
	// GarbageMax is the largest random datagram's payload, bytes.
	GarbageMax = 1400
)

// UDPPacket writes an IPv4/UDP packet into buf (the kernel fills in the
// IP length, ID and checksum; the UDP checksum is left out, as IPv4
// allows).
func UDPPacket(buf []byte, src, dst netip.AddrPort, payload []byte) []byte {
	p := buf[:28+len(payload)]
	clear(p[:28])
	p[0], p[8], p[9] = 0x45, 64, 17 // IPv4, 20-byte header; TTL; UDP
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(p[12:16], s[:])
	copy(p[16:20], d[:])
	binary.BigEndian.PutUint16(p[20:], src.Port())
	binary.BigEndian.PutUint16(p[22:], dst.Port())
	binary.BigEndian.PutUint16(p[24:], uint16(8+len(payload)))
	copy(p[28:], payload)
	return p
}

// Garbage is attack (a): GarbageCount random datagrams of 1..GarbageMax
// bytes from random ports of src to dst (seeded: every run sends the same
// ones).
func Garbage(src netip.Addr, dst netip.AddrPort) [][]byte {
	rng := rand.New(rand.NewPCG(3, 4))
	var pkts [][]byte
	for range GarbageCount {
		payload := make([]byte, 1+rng.IntN(GarbageMax))
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		from := netip.AddrPortFrom(src, uint16(1024+rng.IntN(64000)))
		pkts = append(pkts, UDPPacket(make([]byte, 28+len(payload)), from, dst, payload))
	}
	return pkts
}

// Spoofed is attack (b)'s packets: each payload from its own random
// source address in SpoofNet and random port (seeded), to dst.
func Spoofed(payloads [][]byte, dst netip.AddrPort) [][]byte {
	rng := rand.New(rand.NewPCG(5, 6))
	base := netip.MustParsePrefix(SpoofNet).Addr().As4()
	pkts := make([][]byte, 0, len(payloads))
	for _, pl := range payloads {
		a := base
		v := binary.BigEndian.Uint32(a[:]) | rng.Uint32()&(1<<22-1)
		binary.BigEndian.PutUint32(a[:], v)
		src := netip.AddrPortFrom(netip.AddrFrom4(a), uint16(1024+rng.IntN(64000)))
		pkts = append(pkts, UDPPacket(make([]byte, 28+len(pl)), src, dst, pl))
	}
	return pkts
}

// YipInitiations are n yip-router handshake initiations to responder from
// one fresh static key the responder does not know: a valid mac1 for its
// key, each initiation its own (the responder drops a repeated one as a
// replay, crypto.InitiationFilter, so repeats would not be a flood of
// initiations).
func YipInitiations(responder crypto.PublicKey, n int) ([][]byte, error) {
	stranger, err := crypto.GeneratePrivateKey()
	if err != nil {
		return nil, err
	}
	loc := crypto.NewLocal(stranger, true)
	pb, err := loc.AddPeer(responder, crypto.PresharedKey{})
	if err != nil {
		return nil, err
	}
	inits := make([][]byte, 0, n)
	for i := range n {
		_, init, err := loc.Initiate(pb, uint32(i+1), crypto.LaneOffer{Ports: []uint16{40000, 40001}}, time.Now())
		if err != nil {
			return nil, err
		}
		inits = append(inits, init)
	}
	return inits, nil
}

// WGInitiations are n WireGuard handshake initiations to the responder
// with static public key pub: random sender index, ephemeral, static and
// timestamp (seeded), a valid mac1, mac2 zero. wireguard-go checks mac1
// first; under load it then demands a cookie (mac2) instead of doing the
// handshake's Diffie-Hellman, which is the behaviour a flood of these
// measures.
func WGInitiations(pub [32]byte, n int) [][]byte {
	key := WGMAC1Key(pub)
	rng := rand.New(rand.NewPCG(7, 8))
	msgs := make([][]byte, n)
	for i := range msgs {
		m := make([]byte, WGInitiationLen)
		for j := 4; j < wgMAC1Off; j += 8 {
			binary.LittleEndian.PutUint64(m[j:], rng.Uint64())
		}
		binary.LittleEndian.PutUint32(m, 1)
		mac := WGMAC1(key, m)
		copy(m[wgMAC1Off:], mac[:])
		clear(m[wgMAC1Off+16:])
		msgs[i] = m
	}
	return msgs
}

// Replay prepares captured IPv4/UDP packets for resending byte for byte:
// only the UDP checksum is cleared (veth leaves it partial, offloaded;
// IPv4 lets us send none). It changes pkts in place and returns them.
func Replay(pkts [][]byte) [][]byte {
	for _, p := range pkts {
		ihl := int(p[0]&0x0f) * 4
		p[ihl+6], p[ihl+7] = 0, 0
	}
	return pkts
}

// SplitGSO cuts one captured UDP GSO packet (IPv4, its UDP payload a run
// of segments of size seg, the last one possibly shorter) into the
// datagrams the kernel sends for it: each with the IP header copied, its
// total length, ID (the original's plus the segment's index) and header
// checksum set, and its UDP length set (UDP checksum none). A packet with
// seg 0 or no more payload than seg is returned as it is.
func SplitGSO(p []byte, seg int) [][]byte {
	if len(p) < 20 {
		return nil
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < 20 || len(p) < ihl+8 {
		return nil
	}
	payload := p[ihl+8:]
	if seg <= 0 || len(payload) <= seg {
		return [][]byte{p}
	}
	id := binary.BigEndian.Uint16(p[4:])
	var out [][]byte
	for i := 0; len(payload) > 0; i++ {
		n := min(seg, len(payload))
		d := make([]byte, ihl+8+n)
		copy(d, p[:ihl+8])
		copy(d[ihl+8:], payload[:n])
		binary.BigEndian.PutUint16(d[2:], uint16(len(d)))
		binary.BigEndian.PutUint16(d[4:], id+uint16(i))
		binary.BigEndian.PutUint16(d[10:], 0)
		binary.BigEndian.PutUint16(d[10:], ipChecksum(d[:ihl]))
		binary.BigEndian.PutUint16(d[ihl+4:], uint16(8+n))
		d[ihl+6], d[ihl+7] = 0, 0
		out = append(out, d)
		payload = payload[n:]
	}
	return out
}

// ipChecksum is the Internet checksum of an IPv4 header (its checksum
// field zero).
func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
