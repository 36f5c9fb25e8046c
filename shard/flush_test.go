package shard

import (
	"crypto/rand"
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// An FEC deadline visits only the keys whose encoder holds a partial
// group: among a hundred idle lanes, the one that sent is flushed (its
// partial group's parity leaves) and then leaves the list; the lanes that
// sent nothing are never in it.
func TestTickFECVisitsOnlyBusyKeys(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 2})
	sa := a.shards[0]
	var k1, k2 [32]byte
	rand.Read(k1[:])
	for i := range 100 {
		installOn(t, a, 0, PeerID(10+i), netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), 40000),
			crypto.NewSessionKeys(k1, k2, true), func(lc *LaneConfig) { lc.FEC = fec.EncoderConfig{K: 4, R: 2} })
	}
	if len(sa.flushing) != 0 {
		t.Fatalf("%d keys to flush before anything was sent", len(sa.flushing))
	}
	sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1)
	if len(sa.flushing) != 1 || sa.flushing[0].ln.cfg.Peer != 2 {
		t.Fatalf("after one packet the flush list is %d entries, want the sending lane's keys", len(sa.flushing))
	}
	sa.now = sa.now.Add(time.Second) // past any flush deadline
	if next := sa.tickFEC(); !next.IsZero() {
		t.Fatalf("a deadline is still pending after the flush: %v", next)
	}
	sa.flushAll()
	if len(a.sent[0]) == 0 {
		t.Fatal("the partial group's parity did not leave")
	}
	if len(sa.flushing) != 0 || sa.flushing[:1][0].ln != nil {
		t.Fatalf("the flushed keys stay in the list (%d entries) or are still referenced", len(sa.flushing))
	}
}

// Keys of a lane that leaves the shard leave the flush list with it: a
// removed peer's at once, and a moved lane's go to the shard that adopts
// it, which flushes them.
func TestFlushListFollowsLane(t *testing.T) {
	a, b := newSide(t, 2, routesA), newSide(t, 1, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 2})
	s0, s1 := a.shards[0], a.shards[1]
	sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1)
	if len(s0.flushing) != 1 {
		t.Fatalf("flush list %d entries after a packet, want 1", len(s0.flushing))
	}
	s0.MoveLane(2, 0, s1)
	if len(s0.flushing) != 0 {
		t.Fatal("a lane given to another shard stays in this shard's flush list")
	}
	runQueued(a)
	if len(s1.flushing) != 1 || s1.ownedLane(2, 0) == nil {
		t.Fatalf("the adopting shard's flush list has %d entries, want the moved lane's keys", len(s1.flushing))
	}
	s1.now = s1.now.Add(time.Second)
	s1.tickFEC()
	s1.flushAll()
	if len(a.sent[1]) == 0 || len(s1.flushing) != 0 {
		t.Fatalf("the adopting shard sent %d datagrams and keeps %d keys to flush", len(a.sent[1]), len(s1.flushing))
	}
	a.sent[1] = nil
	sendOne(t, a, 1, "10.1.0.5", "10.2.0.9", 2)
	s1.RemovePeer(2)
	if len(s1.flushing) != 0 {
		t.Fatal("a removed peer's keys stay in the flush list")
	}
}

// A lane that sent and received nothing for idleAfter is visited by tick
// every idleTick, not at every tick; a datagram for it makes the next tick
// visit it again, and a persistent keepalive still leaves on time (within
// idleTick of its wait).
func TestIdleLaneVisitedEveryIdleTick(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sa := a.shards[0]
	ln := sa.ownedLane(2, 0)
	start := sa.now
	visits, steps := 0, 0
	for sa.now = start; sa.now.Before(start.Add(6 * time.Second)); sa.now = sa.now.Add(idlePoll) {
		if int64(sa.now.Sub(stampEpoch)) >= sa.table.wakes[ln.slot] {
			visits++
		}
		steps++
		sa.tick()
	}
	// The first idleAfter at every tick, then one in idleTick/idlePoll.
	if max := int(idleAfter/idlePoll) + int(6*time.Second/idleTick) + 2; visits > max || visits < int(6*time.Second/idleTick) {
		t.Fatalf("an idle lane was visited at %d of %d ticks, want %d at most", visits, steps, max)
	}
	sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1)
	if sa.table.wakes[ln.slot] != 0 {
		t.Fatal("a lane that just sent is not visited at the next tick")
	}

	// A persistent keepalive on an idle lane leaves within idleTick of
	// its wait.
	sa.SetKeepalive(2, 3*time.Second)
	a.sent[0] = nil
	from := sa.now
	var sentAt []time.Duration
	for ; sa.now.Before(from.Add(12 * time.Second)); sa.now = sa.now.Add(idlePoll) {
		sa.tick()
		sa.flushAll()
		if len(a.sent[0]) > 0 {
			sentAt = append(sentAt, sa.now.Sub(from))
			a.sent[0] = nil
		}
	}
	if len(sentAt) < 3 {
		t.Fatalf("keepalives at %v over 12 s, want one about every 3 s", sentAt)
	}
	prev := time.Duration(0)
	for _, at := range sentAt {
		// The wait is jittered ±jitterFraction; an idle lane may wait
		// up to idleTick more.
		if gap := at - prev; gap > time.Duration(float64(3*time.Second)*(1+jitterFraction))+idleTick+idlePoll {
			t.Fatalf("keepalives at %v: a gap of %v", sentAt, gap)
		}
		prev = at
	}
}

// The timers run under a clock set before the process started (the fuzz
// targets' ingressT0): a lane's wake time 0 means "at the next run"
// whatever the clock, so a persistent keepalive still leaves.
func TestTimersRunOnAnEarlyClock(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sa := a.shards[0]
	sa.SetKeepalive(2, time.Second)
	a.sent[0] = nil
	for sa.now = ingressT0; sa.now.Before(ingressT0.Add(5 * time.Second)); sa.now = sa.now.Add(idlePoll) {
		sa.tick()
		sa.flushAll()
	}
	if len(a.sent[0]) < 3 {
		t.Fatalf("%d datagrams in 5 s with a 1 s keepalive on a clock before the process started", len(a.sent[0]))
	}
}
