package shard

import (
	"testing"
	"time"

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

// A lane's FEC counts (show, yip_peer_fec_recovered_total) are counters:
// a rekey, and the previous keys' expiry after it, never take back what
// the old keys' decoder recovered.
func TestLaneFECCountsSurviveRekey(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	sb := b.shards[0]
	recovered := func() uint64 {
		t.Helper()
		st := sb.LaneStatuses()
		if len(st) != 1 {
			t.Fatalf("%d lanes", len(st))
		}
		return st[0].Recovered
	}
	// Each session: one group of 4 with its data packet 2 lost, parity
	// recovers it.
	session := func(seq int) {
		t.Helper()
		connect(t, a, b, fec.EncoderConfig{K: 4, R: 2})
		for i := range 4 {
			inject(t, a.shards[0], ipPacket("10.1.0.5", "10.2.0.9", 300, seq+i))
		}
		deliverAll(t, a, b, func(k int) bool { return k == 2 })
	}
	session(0)
	if got := recovered(); got != 1 {
		t.Fatalf("first keys: recovered %d, want 1", got)
	}
	session(10) // the rekey: the first keys become the previous ones
	if got := recovered(); got != 2 {
		t.Fatalf("after the rekey: recovered %d, want 2", got)
	}
	sb.now = sb.now.Add(prevKeep + time.Second)
	sb.tick()
	if sb.ownedLane(1, 0).prev != nil {
		t.Fatal("previous keys kept past prevKeep")
	}
	if got := recovered(); got != 2 {
		t.Fatalf("after the previous keys expired: recovered %d, want 2", got)
	}
	session(20)
	session(30) // two rekeys at once: the oldest keys are dropped at install
	if got := recovered(); got != 4 {
		t.Fatalf("after two more rekeys: recovered %d, want 4", got)
	}
}
