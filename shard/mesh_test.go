package shard

// The mesh under pressure and in motion: a full ring, and a lane that
// moved while a packet for it was on its way.

import (
	"testing"

	"github.com/yip-router/yip-router/fec"
)

// A hand-over ring that the owner does not drain fills: what does not fit
// is dropped and counted at once (the sender never waits), its buffers
// back in the sender's pool. What fit is sent when the owner runs, and
// every lent buffer comes home over the return ring.
func TestMeshRingFullDropsAndCounts(t *testing.T) {
	a := newSidePool(t, 2, routesA, 2*MeshRingSize)
	b := newSide(t, 1, routesB) // one lane, owned by A's shard 0
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 0})
	a0, a1 := a.shards[0], a.shards[1]
	const over = 100
	for i := range MeshRingSize + over {
		inject(t, a1, ipPacket("10.1.0.5", "10.2.0.9", 60, i))
	}
	a1.flushAll()
	a1.publish()
	sn := a1.Snapshot()
	if sn.Get(HandedOff) != MeshRingSize || sn.Get(DropRingFull) != over {
		t.Fatalf("handed_off %d drop_ring_full %d; want %d and %d", sn.Get(HandedOff), sn.Get(DropRingFull), MeshRingSize, over)
	}
	if lent := a1.pool.Cap() - a1.pool.Free(); lent != MeshRingSize {
		t.Fatalf("%d buffers out of shard 1's pool, want the %d in the ring", lent, MeshRingSize)
	}
	if n := a0.takeMesh(); n != MeshRingSize {
		t.Fatalf("the owner took %d packets, want %d", n, MeshRingSize)
	}
	a0.flushAll()
	a1.takeMesh()
	if a1.pool.Free() != a1.pool.Cap() {
		t.Fatalf("%d of shard 1's %d buffers home", a1.pool.Free(), a1.pool.Cap())
	}
	if n := deliverAll(t, a, b, nil); n != MeshRingSize || len(b.tun[0]) != MeshRingSize {
		t.Fatalf("%d datagrams, %d delivered; want %d", n, len(b.tun[0]), MeshRingSize)
	}
}

// A packet handed to a lane's owner that gave the lane to another shard
// meanwhile (MoveLane) is passed on to the new owner, which sends it; it
// reaches the peer once and its buffer goes home to the shard that read it.
func TestMeshPacketFollowsMovedLane(t *testing.T) {
	a, b := newSide(t, 3, routesA), newSide(t, 2, routesB) // lanes 0 and 1
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 0})
	a0, a1, a2 := a.shards[0], a.shards[1], a.shards[2]
	inject(t, a2, ipPacket("10.1.0.5", "10.2.0.9", 60, 7)) // shard 2 has no lane: lane 2 mod 2 = 0, shard 0's
	a2.flushAll()
	a0.MoveLane(2, 0, a1) // before shard 0 took the packet
	a0.takeMesh()
	a0.flushAll()
	a1.runControl() // adopts lane 0
	if n := a1.takeMesh(); n != 1 {
		t.Fatalf("the new owner took %d packets, want 1", n)
	}
	a1.flushAll()
	if len(a.sent[0]) != 0 || len(a.sent[1]) != 1 {
		t.Fatalf("old owner sent %d, new owner %d; want 0 and 1", len(a.sent[0]), len(a.sent[1]))
	}
	feed(b.shards[0], addrA, a.sent[1][0].data) // lane 0's datagrams come from lane 0's address
	if len(b.tun[0]) != 1 {
		t.Fatalf("B delivered %d packets, want 1", len(b.tun[0]))
	}
	a2.takeMesh()
	if a2.pool.Free() != a2.pool.Cap() {
		t.Fatalf("%d of shard 2's %d buffers home", a2.pool.Free(), a2.pool.Cap())
	}
	for i, s := range a.shards {
		s.publish()
		sn := s.Snapshot()
		want := [3][2]uint64{{1, 1}, {1, 0}, {0, 1}}[i] // taken_over, handed_off
		if sn.Get(TakenOver) != want[0] || sn.Get(HandedOff) != want[1] {
			t.Errorf("shard %d: taken_over %d handed_off %d, want %d and %d", i, sn.Get(TakenOver), sn.Get(HandedOff), want[0], want[1])
		}
	}
}
