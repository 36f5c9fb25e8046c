package offload

import (
	"bytes"
	"encoding/binary"
)

// Coalescer merges the packets one shard delivers in a batch into as few
// TUN writes as it can (GRO): consecutive TCP segments of one flow become
// one TSO superpacket, equal-sized UDP datagrams of one flow one USO
// superpacket. Packets are copied in as they are delivered (so the caller's
// buffers are free at once) and written, in arrival order of their first
// packet, by Flush. Packets of one flow are never reordered: a packet that
// cannot join its flow's open superpacket closes it and starts the next.
//
// The merge rules are the kernel's GRO rules (tcp_gro_receive,
// inet_gro_receive), conservatively: TCP only with flags ACK or ACK|PSH and
// payload, IPv4 without options or fragments or IPv6 without extension
// headers, identical addresses, ports, TOS/traffic class, TTL/hop limit,
// flow label, DF, acknowledgment number, window, data offset and reserved
// bits, and TCP options, each segment starting where the last ended, a PSH
// or a shorter segment only last; IPv4 IDs incrementing by one (or, with
// DF, all equal), since the kernel rewrites them so when it splits the
// superpacket again; UDP only datagrams of the first one's size, a shorter
// one last. A packet is merged only if its checksums verify: the
// superpacket goes out with a partial checksum the kernel completes, and a
// recomputed IPv4 header checksum, which would otherwise hide a bad one.
type Coalescer struct {
	slots   [][]byte // HdrLen + MaxPacket each, reused
	ents    []entry
	used    int
	udp     bool // the device accepts USO superpackets
	tcp     bool // the device accepts TSO superpackets
	maxSegs int
}

// entry is one packet or superpacket waiting in slot i of the Coalescer.
type entry struct {
	n       int // packet bytes in the slot after the header room
	segs    int
	gsoSize int
	ip      ipInfo
	hdrLen  int // IP + transport header
	nextSeq uint32
	open    bool // later packets of the flow may still join
}

// NewCoalescer makes a coalescer with room for slots packets or
// superpackets between flushes. tcp and udp say which superpackets the TUN
// device takes (TSO, USO); with neither it only copies and batches.
func NewCoalescer(slots int, tcp, udp bool) *Coalescer {
	c := &Coalescer{ents: make([]entry, slots), tcp: tcp, udp: udp, maxSegs: 64}
	for range slots {
		c.slots = append(c.slots, make([]byte, HdrLen+MaxPacket))
	}
	return c
}

// SetOffloads changes which superpackets Flush may build (a write the
// kernel refused turns one off). Call it between flushes.
func (c *Coalescer) SetOffloads(tcp, udp bool) { c.tcp, c.udp = tcp, udp }

// Pending is how many writes Flush would make.
func (c *Coalescer) Pending() int { return c.used }

// Add copies pkt in, merging it into an open superpacket of its flow when
// the rules allow. It returns false, taking nothing, when every slot is
// used: Flush, then Add again. pkt must be at most MaxPacket bytes (the
// shard's packets are far smaller); a longer one is dropped.
func (c *Coalescer) Add(pkt []byte) bool {
	if len(pkt) > MaxPacket {
		return true
	}
	ip, flow, tcp, ok := c.classify(pkt)
	if flow {
		for i := c.used - 1; i >= 0; i-- {
			e := &c.ents[i]
			if !e.open || !sameFlow(c.slots[i][HdrLen:HdrLen+e.n], e.ip, pkt, ip) {
				continue
			}
			// The flow's newest superpacket: merge, or close it so
			// nothing of this flow joins it after pkt.
			if ok && c.merge(e, c.slots[i][HdrLen:], pkt, ip, tcp) {
				return true
			}
			e.open = false
			break
		}
	}
	if c.used == len(c.ents) {
		return false
	}
	i := c.used
	c.used++
	n := copy(c.slots[i][HdrLen:], pkt)
	e := &c.ents[i]
	*e = entry{n: n, segs: 1}
	if !ok {
		return true
	}
	e.ip = ip
	e.open = true
	t := pkt[ip.hlen:]
	if tcp {
		e.hdrLen = ip.hlen + int(t[12]>>4)*4
		e.gsoSize = len(pkt) - e.hdrLen
		e.nextSeq = binary.BigEndian.Uint32(t[4:]) + uint32(e.gsoSize)
		e.open = t[13]&tcpPSH == 0
	} else {
		e.hdrLen = ip.hlen + udpLen
		e.gsoSize = len(pkt) - e.hdrLen
	}
	return true
}

// classify tells what pkt is: flow is true for TCP and UDP packets whose
// ports can be read (so an open superpacket of their flow must be closed if
// they cannot join it), ok for packets that may be merged at all.
func (c *Coalescer) classify(pkt []byte) (ip ipInfo, flow, tcp, ok bool) {
	ip, valid := parseIP(pkt)
	if !valid || !ipLenOK(pkt, ip) || (ip.proto != protoTCP && ip.proto != protoUDP) {
		return ip, false, false, false
	}
	tcp = ip.proto == protoTCP
	if len(pkt) < ip.hlen+udpLen {
		return ip, false, tcp, false
	}
	flow = true
	if !ip.v6 && (ip.hlen != ipv4Len || binary.BigEndian.Uint16(pkt[6:])&0x3fff != 0 || Checksum(pkt[:ipv4Len]) != 0) {
		return ip, flow, tcp, false // options, a fragment, or a bad header
	}
	t := pkt[ip.hlen:]
	if tcp {
		if !c.tcp || len(t) < tcpLen {
			return ip, flow, tcp, false
		}
		th := int(t[12]>>4) * 4
		if th < tcpLen || th >= len(t) { // no payload: never merged
			return ip, flow, tcp, false
		}
		if f := t[13]; f != tcpACK && f != tcpACK|tcpPSH {
			return ip, flow, tcp, false
		}
		return ip, flow, tcp, transportValid(pkt, ip.v6, protoTCP, ip.hlen)
	}
	if !c.udp || len(t) <= udpLen || int(binary.BigEndian.Uint16(t[4:])) != len(t) || (t[6] == 0 && t[7] == 0) {
		return ip, flow, tcp, false
	}
	return ip, flow, tcp, transportValid(pkt, ip.v6, protoUDP, ip.hlen)
}

// sameFlow reports whether a (a packet in a slot) and b are of one flow:
// version, protocol, addresses and ports.
func sameFlow(a []byte, aip ipInfo, b []byte, bip ipInfo) bool {
	if aip.v6 != bip.v6 || aip.proto != bip.proto ||
		!bytes.Equal(a[aip.hlen:aip.hlen+4], b[bip.hlen:bip.hlen+4]) {
		return false
	}
	if aip.v6 {
		return bytes.Equal(a[8:40], b[8:40])
	}
	return bytes.Equal(a[12:20], b[12:20])
}

// merge appends pkt's payload to the superpacket in slot (from the header
// room on) if the rules allow, and reports whether it did.
func (c *Coalescer) merge(e *entry, slot, pkt []byte, ip ipInfo, tcp bool) bool {
	first := slot[:e.n]
	payload := len(pkt) - e.hdrLen
	if ip != e.ip || payload <= 0 || payload > e.gsoSize || e.n+payload > MaxPacket || e.segs >= c.maxSegs {
		return false
	}
	// TOS, TTL and DF (IPv4); version, traffic class, flow label and hop
	// limit (IPv6).
	if ip.v6 {
		if !bytes.Equal(first[:4], pkt[:4]) || first[7] != pkt[7] {
			return false
		}
	} else {
		if first[1] != pkt[1] || first[8] != pkt[8] || first[6]&0x40 != pkt[6]&0x40 {
			return false
		}
		id0, id := binary.BigEndian.Uint16(first[4:]), binary.BigEndian.Uint16(pkt[4:])
		if id != id0+uint16(e.segs) && (first[6]&0x40 == 0 || id != id0) {
			return false
		}
	}
	ft, pt := first[ip.hlen:], pkt[ip.hlen:]
	if tcp {
		if ft[12] != pt[12] || // data offset, reserved bits (AccECN's AE)
			binary.BigEndian.Uint32(pt[4:]) != e.nextSeq ||
			!bytes.Equal(ft[8:12], pt[8:12]) || // acknowledgment number
			!bytes.Equal(ft[14:16], pt[14:16]) || // window
			!bytes.Equal(ft[tcpLen:e.hdrLen-ip.hlen], pt[tcpLen:e.hdrLen-ip.hlen]) { // options
			return false
		}
		if pt[13]&tcpPSH != 0 {
			ft[13] |= tcpPSH
			e.open = false
		}
		e.nextSeq += uint32(payload)
	} else if e.hdrLen != ip.hlen+udpLen {
		return false
	}
	copy(slot[e.n:], pkt[e.hdrLen:])
	e.n += payload
	e.segs++
	if payload < e.gsoSize {
		e.open = false
	}
	return true
}

// Flush hands every pending packet, in order, to write as a TUN write
// (virtio-net header, then the packet) with the number of packets it
// carries, and empties the coalescer.
func (c *Coalescer) Flush(write func(frame []byte, segs int)) {
	for i := range c.used {
		e := &c.ents[i]
		frame := c.slots[i][:HdrLen+e.n]
		if e.segs == 1 {
			Hdr{}.Encode(frame)
		} else {
			c.finish(e, frame)
		}
		write(frame, e.segs)
	}
	c.used = 0
}

// finish writes a superpacket's virtio-net header and fixes its IP length
// and transport length and checksum: the transport checksum field gets the
// pseudo-header sum, which the kernel completes (NEEDS_CSUM).
func (c *Coalescer) finish(e *entry, frame []byte) {
	pkt := frame[HdrLen:]
	ip := e.ip
	setIPLen(pkt, ip, len(pkt))
	t := pkt[ip.hlen:]
	h := Hdr{Flags: FlagNeedsCsum, HdrLen: uint16(e.hdrLen), GSOSize: uint16(e.gsoSize), CsumStart: uint16(ip.hlen)}
	var at int
	switch {
	case e.hdrLen-ip.hlen == udpLen && ip.proto == protoUDP:
		h.GSOType, h.CsumOffset, at = GSOUDPL4, udpCsumOff, udpCsumOff
		binary.BigEndian.PutUint16(t[4:], uint16(len(t)))
	case ip.v6:
		h.GSOType, h.CsumOffset, at = GSOTCPv6, tcpCsumOff, tcpCsumOff
	default:
		h.GSOType, h.CsumOffset, at = GSOTCPv4, tcpCsumOff, tcpCsumOff
	}
	binary.BigEndian.PutUint16(t[at:], fold(pseudoSum(pkt, ip.v6, ip.proto, len(t))))
	h.Encode(frame)
}
