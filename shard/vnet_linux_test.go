package shard

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/ring"
	"github.com/yip-router/yip-router/shard/offload"
	"golang.org/x/sys/unix"
)

// tunRead frames a TUN read: virtio-net header h, then pkt.
func tunRead(h offload.Hdr, pkt []byte) []byte {
	b := make([]byte, offload.HdrLen+len(pkt))
	h.Encode(b)
	copy(b[offload.HdrLen:], pkt)
	return b
}

// tsoSuperpacket is what the kernel hands a TUN reader for a TCP send of
// payload bytes from src to dst (IPv4 or IPv6): one packet, the TCP
// checksum field holding the pseudo-header sum, gso_size mss.
func tsoSuperpacket(src, dst string, payload, mss int) (offload.Hdr, []byte) {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	ipl, gso := 20, uint8(offload.GSOTCPv4)
	if s.Is6() {
		ipl, gso = 40, offload.GSOTCPv6
	}
	n := ipl + 20 + payload
	p := make([]byte, n)
	var pseudo []byte
	if s.Is4() {
		p[0], p[6], p[8], p[9] = 0x45, 0x40, 64, 6
		binary.BigEndian.PutUint16(p[2:], uint16(n))
		copy(p[12:], s.AsSlice())
		copy(p[16:], d.AsSlice())
		binary.BigEndian.PutUint16(p[10:], offload.Checksum(p[:20]))
		pseudo = append(append([]byte{}, p[12:20]...), 0, 6, byte((n-ipl)>>8), byte(n-ipl))
	} else {
		p[0], p[6], p[7] = 0x60, 6, 64
		binary.BigEndian.PutUint16(p[4:], uint16(n-40))
		copy(p[8:], s.AsSlice())
		copy(p[24:], d.AsSlice())
		pseudo = append(append([]byte{}, p[8:40]...), 0, 0, byte((n-ipl)>>8), byte(n-ipl), 0, 0, 0, 6)
	}
	t := p[ipl:]
	binary.BigEndian.PutUint16(t, 40000)
	binary.BigEndian.PutUint16(t[2:], 5201)
	binary.BigEndian.PutUint32(t[4:], 7)
	binary.BigEndian.PutUint32(t[8:], 9)
	t[12], t[13] = 5<<4, 0x18 // ACK|PSH
	binary.BigEndian.PutUint16(t[14:], 1000)
	for i := range payload {
		t[20+i] = byte(i * 13)
	}
	binary.BigEndian.PutUint16(t[16:], ^offload.Checksum(pseudo))
	h := offload.Hdr{Flags: offload.FlagNeedsCsum, GSOType: gso, HdrLen: uint16(ipl + 20),
		GSOSize: uint16(mss), CsumStart: uint16(ipl), CsumOffset: 16}
	return h, p
}

// vnetSides is a pair of one-shard sides whose TUN I/O carries the
// virtio-net header: a reads the frames in reads, b's writes are kept.
func vnetSides(t testing.TB, reads *[][]byte) (a, b *side) {
	a, b = newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 2})
	for _, sd := range []*side{a, b} {
		sd.shards[0].enableVnet(true, true)
	}
	a.shards[0].tunIn = func(buf []byte) (int, error) {
		if len(*reads) == 0 {
			return 0, nil
		}
		n := copy(buf, (*reads)[0])
		*reads = (*reads)[1:]
		return n, nil
	}
	return a, b
}

// A TSO superpacket read from A's TUN is split, sealed and sent as
// MTU-sized datagrams; B coalesces what it opens back into the same
// superpacket and writes it with one TUN write.
func TestVnetSplitAndCoalesceThroughTheTunnel(t *testing.T) {
	for _, pair := range [][2]string{{"10.1.0.5", "10.2.0.9"}, {"fd00:1::5", "fd00:2::9"}} {
		h, super := tsoSuperpacket(pair[0], pair[1], 20000, 1360)
		reads := [][]byte{tunRead(h, super)}
		a, b := vnetSides(t, &reads)
		sa, sb := a.shards[0], b.shards[0]
		if got := sa.readTun(); got != 15 {
			t.Fatalf("%s: %d packets from one superpacket, want 15", pair[0], got)
		}
		deliverAll(t, a, b, nil)
		sb.flushAll()
		if len(b.tun[0]) != 1 {
			t.Fatalf("%s: %d TUN writes, want one superpacket", pair[0], len(b.tun[0]))
		}
		w := b.tun[0][0]
		gh, _ := offload.DecodeHdr(w)
		if gh.GSOType != h.GSOType || gh.GSOSize != h.GSOSize || !bytes.Equal(w[offload.HdrLen:], super) {
			t.Fatalf("%s: written superpacket differs from the one read (header %+v)", pair[0], gh)
		}
		sa.publish()
		sb.publish()
		snA, snB := sa.Snapshot(), sb.Snapshot()
		if snA.Get(TunSuperIn) != 1 || snA.Get(TunIn) != 15 || snB.Get(TunSuperOut) != 1 || snB.Get(TunOut) != 15 {
			t.Fatalf("counters: A %v B %v", snA, snB)
		}
	}
}

// A read with a header the splitter refuses is counted, and the next read
// still goes through.
func TestVnetBadHeaderCounted(t *testing.T) {
	h, super := tsoSuperpacket("10.1.0.5", "10.2.0.9", 3000, 1360)
	bad := h
	bad.GSOType = 9
	reads := [][]byte{{1, 2, 3}, tunRead(bad, super), tunRead(h, super)}
	a, b := vnetSides(t, &reads)
	sa := a.shards[0]
	if got := sa.readTun(); got != 5 { // 2 refused reads + 3 segments
		t.Fatalf("%d packets", got)
	}
	sa.publish()
	if sn := sa.Snapshot(); sn.Get(DropTunBad) != 2 {
		t.Fatalf("drop_tun_bad %d", sn.Get(DropTunBad))
	}
	deliverAll(t, a, b, nil)
	b.shards[0].flushAll()
	if len(b.tun[0]) != 1 {
		t.Fatalf("%d writes", len(b.tun[0]))
	}
}

// A kernel that refuses superpacket writes (EINVAL) loses nothing: the
// shard writes that superpacket's packets one by one and stops
// coalescing.
func TestVnetRefusedSuperpacketFallsBack(t *testing.T) {
	h, super := tsoSuperpacket("10.1.0.5", "10.2.0.9", 6000, 1360)
	reads := [][]byte{tunRead(h, super), tunRead(h, super)}
	a, b := vnetSides(t, &reads)
	sb := b.shards[0]
	var plain [][]byte
	sb.tunOut = func(f []byte) error {
		gh, _ := offload.DecodeHdr(f)
		if gh.GSOType != offload.GSONone {
			return unix.EINVAL
		}
		plain = append(plain, bytes.Clone(f[offload.HdrLen:]))
		return nil
	}
	a.shards[0].readTun()
	deliverAll(t, a, b, nil)
	sb.flushAll()
	if len(plain) != 10 || !sb.vnet.groRefused {
		t.Fatalf("%d packets written after the refusal, refused=%v", len(plain), sb.vnet.groRefused)
	}
	sb.publish()
	if sn := sb.Snapshot(); sn.Get(DropTunWrite) != 0 || sn.Get(TunOut) != 10 {
		t.Fatalf("counters %v", sn)
	}
}

// Split, seal, send, open, coalesce and write allocate nothing.
func TestVnetZeroAlloc(t *testing.T) {
	h, super := tsoSuperpacket("10.1.0.5", "10.2.0.9", 30000, 1360)
	frame := tunRead(h, super)
	var reads [][]byte
	a, b := vnetSides(t, &reads)
	sa, sb := a.shards[0], b.shards[0]
	rl := newRelay(sa, 64)
	writes := 0
	sb.tunOut = func([]byte) error { writes++; return nil }
	once := [][]byte{frame}
	sa.tunIn = func(buf []byte) (int, error) {
		if len(once) == 0 {
			return 0, nil
		}
		once = once[:0]
		return copy(buf, frame), nil
	}
	round := func() {
		once = once[:1]
		sa.readTun()
		sa.flushAll()
		rl.deliver(sb)
		sb.flushAll()
	}
	round()
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("%.1f allocations per superpacket", allocs)
	}
	if writes == 0 {
		t.Fatal("nothing written")
	}
}

// With the pool low, the shard leaves packets in the TUN queue instead of
// reading and dropping them, and a read counts against the budget whether
// its packets went on or not.
func TestVnetReadStopsWhenPoolLow(t *testing.T) {
	h, super := tsoSuperpacket("10.1.0.5", "10.2.0.9", 3000, 1360)
	frame := tunRead(h, super)
	reads := make([][]byte, 1000)
	for i := range reads {
		reads[i] = frame
	}
	a, _ := vnetSides(t, &reads)
	sa := a.shards[0]
	var held []*ring.Packet
	for sa.pool.Free() >= sa.cfg.Batch {
		held = append(held, sa.pool.Get())
	}
	if got := sa.readTun(); got != 0 || len(reads) != 1000 {
		t.Fatalf("read %d packets (%d reads) with the pool low", got, 1000-len(reads))
	}
	for _, p := range held {
		sa.pool.Put(p)
	}
	sa.readTun()
	if taken := 1000 - len(reads); taken > readBudgetFactor*sa.cfg.Batch/3+1 {
		t.Fatalf("one iteration took %d reads of 3 packets each", taken)
	}
}
