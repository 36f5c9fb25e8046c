package shard

import (
	"encoding/binary"
	"net/netip"
	"testing"

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
// counted; the segments delivered as received are untouched.
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
	// Group 1 loses its second segment; its parity waits.
	var parity []byte
	for i := 4; i < 8; i++ {
		d := send(i, uint32(106+i))
		if i != 5 {
			feed(sb, addrA, d[0].data)
		}
		if len(d) == 2 {
			parity = d[1].data
		}
	}
	if parity == nil {
		t.Fatal("group 1 sent no parity")
	}
	// A retransmission of segment 1, sent later, is delivered before the
	// parity.
	feed(sb, addrA, send(1, 200)[0].data)
	feed(sb, addrA, parity)
	got := b.tun[0]
	if len(got) != 4+3+1+1 {
		t.Fatalf("delivered %d packets, want 9", len(got))
	}
	for i, p := range got[:8] {
		if tcpChecksum(p) != 0 {
			t.Fatalf("packet %d: checksum does not verify", i)
		}
	}
	rec := got[8]
	if ts := binary.BigEndian.Uint32(rec[20+24:]); ts != 200 {
		t.Fatalf("recovered segment's TSval %d, want 200 (the flow's newest)", ts)
	}
	if seq := binary.BigEndian.Uint32(rec[20+4:]); seq != 5*n {
		t.Fatalf("recovered segment at %d, want %d", seq, 5*n)
	}
	if tcpChecksum(rec) != 0 {
		t.Fatal("recovered segment's checksum does not verify")
	}
	sb.publish()
	sn := sb.Snapshot()
	if n := sn.Get(TSRaised); n != 1 {
		t.Fatalf("fec_tcp_ts_raised %d, want 1", n)
	}
}
