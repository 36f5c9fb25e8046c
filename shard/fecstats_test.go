package shard

import (
	"testing"

	"github.com/yip-router/yip-router/fec"
)

// A lane whose groups each lose a data packet and all their parity keeps
// their data for recovery until the decoder's byte cap: what it then evicts or does not store shows in the
// shard counters (fec_evicted, fec_not_stored), and the data itself is
// still delivered.
func TestFECCapCounters(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 64, R: 8})
	sb := b.shards[0]
	const n = 1200 // 1200 × ~1.4 KB: past the 1 MiB cap
	for seq := range n {
		inject(t, a.shards[0], ipPacket("10.1.0.5", "10.2.0.9", 1400, seq))
		a.shards[0].flushAll()
		if len(a.sent[0]) == 0 {
			t.Fatalf("packet %d: nothing sent", seq)
		}
		// The data datagram goes first; the parity that closes a
		// group after it is lost, and so is one data packet in 64.
		if seq%64 != 5 {
			feed(sb, addrA, a.sent[0][0].data)
		}
		a.sent[0] = nil
	}
	if want := n - (n+58)/64; len(b.tun[0]) != want {
		t.Fatalf("delivered %d, want %d", len(b.tun[0]), want)
	}
	sb.foldLane(sb.ownedLane(1, 0))
	sb.publish()
	sn := sb.Snapshot()
	if sn.Get(FECEvicted)+sn.Get(FECNotStored) == 0 {
		t.Fatalf("fec_evicted %d, fec_not_stored %d after %d unprotected packets", sn.Get(FECEvicted), sn.Get(FECNotStored), n)
	}
	t.Logf("fec_evicted %d, fec_not_stored %d", sn.Get(FECEvicted), sn.Get(FECNotStored))
}
