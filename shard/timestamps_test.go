package shard

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard/offload"
)

// tcpSegment is an IPv4 TCP segment 10.1.0.5:40000 → 10.2.0.9:5201 at
// sequence seq with NOP NOP TS(tsval), n bytes of payload and a valid
// checksum.
func tcpSegment(seq, tsval uint32, n int) []byte {
	p := make([]byte, 20+32+n)
	p[0], p[8], p[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	copy(p[12:], netip.MustParseAddr("10.1.0.5").AsSlice())
	copy(p[16:], netip.MustParseAddr("10.2.0.9").AsSlice())
	th := p[20:]
	binary.BigEndian.PutUint16(th, 40000)
	binary.BigEndian.PutUint16(th[2:], 5201)
	binary.BigEndian.PutUint32(th[4:], seq)
	th[12], th[13] = 8<<4, 0x10
	copy(th[20:], []byte{1, 1, 8, 10})
	binary.BigEndian.PutUint32(th[24:], tsval)
	binary.BigEndian.PutUint16(th[tcpCsumAt:], tcpChecksum(p))
	return p
}

const tcpCsumAt = 16

// tcpChecksum is p's TCP checksum over the pseudo-header, as it should be
// stored (0 if p's stored one verifies).
func tcpChecksum(p []byte) uint16 {
	ps := make([]byte, 12, 12+len(p)-20)
	copy(ps, p[12:20])
	ps[9] = 6
	binary.BigEndian.PutUint16(ps[10:], uint16(len(p)-20))
	return offload.Checksum(append(ps, p[20:]...))
}

// A TCP segment FEC recovers after a retransmission of its flow (a
// segment below the highest delivered, sent later) goes to the TUN queue
// with the retransmission's timestamp and a checksum that verifies, and is
// counted; the segments delivered as received are untouched, one with an
// older timestamp after the retransmission too. The retransmission's
// timestamp is forgotten with time, and tsKeep after the last parity the
// lane stops noting and lets its table go.
func TestRecoveredSegmentTakesFillersTimestamp(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 1})
	sa, sb := a.shards[0], b.shards[0]
	const n = 600
	send := func(i int, ts uint32) []wireDgram {
		inject(t, sa, tcpSegment(uint32(i*n), ts, n))
		sa.flushAll()
		d := a.sent[0]
		a.sent[0] = nil
		return d
	}
	// Group 0 whole, parity too: the lane receives parity.
	for i := range 4 {
		for _, d := range send(i, uint32(100+i)) {
			feed(sb, addrA, d.data)
		}
	}
	// Group 1 (timestamps 110-113) loses its second segment. A
	// retransmission of segment 1, sent later, arrives before the
	// group's last segment and its parity.
	var g1 []wireDgram
	for i := 4; i < 8; i++ {
		g1 = append(g1, send(i, uint32(106+i))...)
	}
	if len(g1) != 5 {
		t.Fatalf("group 1 sent %d datagrams, want 4 and parity", len(g1))
	}
	retrans := send(1, 200)[0]
	for _, d := range []wireDgram{g1[0], g1[2], retrans, g1[3], g1[4]} {
		feed(sb, addrA, d.data)
	}
	got := b.tun[0]
	want := []uint32{100, 101, 102, 103, 110, 112, 200, 113, 200}
	if len(got) != len(want) {
		t.Fatalf("delivered %d packets, want %d", len(got), len(want))
	}
	for i, p := range got {
		if ts := binary.BigEndian.Uint32(p[20+24:]); ts != want[i] {
			t.Errorf("packet %d: TSval %d, want %d", i, ts, want[i])
		}
		if tcpChecksum(p) != 0 {
			t.Errorf("packet %d: checksum does not verify", i)
		}
	}
	if seq := binary.BigEndian.Uint32(got[8][20+4:]); seq != 5*n {
		t.Fatalf("recovered segment at %d, want %d", seq, 5*n)
	}
	sb.publish()
	sn := sb.Snapshot()
	if n := sn.Get(TSRaised); n != 1 {
		t.Fatalf("fec_tcp_ts_raised %d, want 1", n)
	}
	// Half a second of the lane's timer ticks later, the retransmission's
	// timestamp is no longer raised to: group 2 (the retransmission, then
	// segments 8-10) loses segment 9, which stays as it was sent.
	ln := sb.ownedLane(1, 0)
	for range 11 {
		sb.now = sb.now.Add(50 * time.Millisecond)
		sb.expireTimestamps(ln)
	}
	var g2 []wireDgram
	for i := 8; i < 11; i++ {
		g2 = append(g2, send(i, uint32(112+i))...)
	}
	for _, d := range []wireDgram{g2[0], g2[2], g2[3]} {
		feed(sb, addrA, d.data)
	}
	if got := b.tun[0]; len(got) != 12 || binary.BigEndian.Uint32(got[11][20+24:]) != 121 {
		t.Fatalf("%d delivered; the last, segment 9 recovered, has TSval %d, want 121 as sent", len(got), binary.BigEndian.Uint32(got[len(got)-1][20+24:]))
	}
	sb.now = sb.now.Add(tsKeep - time.Millisecond)
	if sb.expireTimestamps(ln); !ln.tsOn || ln.ts == nil {
		t.Fatal("stopped noting before tsKeep")
	}
	sb.now = sb.now.Add(2 * time.Millisecond)
	if sb.expireTimestamps(ln); ln.tsOn || ln.ts != nil {
		t.Fatal("still noting tsKeep after the last parity")
	}
}
