package shard

import (
	"net/netip"
	"testing"

	"github.com/yip-router/yip-router/fec"
)

// A NAT rewrote lane 1's port, so its datagrams arrive on shard 0: shard 0
// recognises the lane by its candidate keys and hands the datagram to the
// owner, the owner reports the lane misplaced once the datagram proves
// itself, and after MoveLane the lane lives on shard 0 with its replay and
// FEC state: later datagrams take no ring hop, replays stay refused.
func TestMisplacedLaneMoves(t *testing.T) {
	a, b := newSide(t, 2, routesA), newSide(t, 2, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	b0, b1 := b.shards[0], b.shards[1]
	type report struct{ from, index, via int }
	var reports []report
	for _, s := range b.shards {
		s.cfg.Misplaced = func(from int, peer PeerID, index, via int) {
			reports = append(reports, report{from, index, via})
		}
	}
	natted := netip.MustParseAddrPort("192.0.2.1:61234") // lane 1's port after the NAT
	d1 := sendOne(t, a, 1, "10.1.0.5", "10.2.0.9", 1)
	feed(b0, natted, d1.data)
	b0.flushAll()
	if n := b1.takeMesh(); n != 1 {
		t.Fatalf("owner took %d datagrams from the mesh, want 1", n)
	}
	if len(b.tun[1]) != 1 {
		t.Fatalf("owner delivered %d", len(b.tun[1]))
	}
	if len(reports) != 1 || reports[0] != (report{1, 1, 0}) {
		t.Fatalf("misplaced reports %+v, want lane 1 from shard 1 via 0", reports)
	}
	if st := b1.LaneStatuses(); st[0].Remote != natted {
		t.Fatalf("owner's lane at %s, want the NAT's port %s", st[0].Remote, natted)
	}
	// The router's move.
	b1.MoveLane(1, 1, b0)
	b0.runControl()
	b0.takeMesh() // buffers home
	b1.takeMesh()
	d2 := sendOne(t, a, 1, "10.1.0.5", "10.2.0.9", 2)
	feed(b0, natted, d2.data)
	feed(b0, natted, d1.data) // a replay: the replay window moved too
	if len(b.tun[0]) != 1 {
		t.Fatalf("shard 0 delivered %d after the move, want 1", len(b.tun[0]))
	}
	b0.publish()
	b1.publish()
	s0, s1 := b0.Snapshot(), b1.Snapshot()
	if s0.Get(ForeignLane) != 1 || s0.Get(LaneAdopted) != 1 {
		t.Fatalf("shard 0: foreign_lane %d (want only the first), lane_adopted %d", s0.Get(ForeignLane), s0.Get(LaneAdopted))
	}
	if got := s0.Get(DropReplay) + s0.Get(DropDuplicate) + s0.Get(DropFECWindow); got != 1 {
		t.Fatalf("the replay after the move was refused %d times, want 1", got)
	}
	if st := b0.LaneStatuses(); len(st) != 2 || s1.Get(LaneAdopted) != 0 {
		t.Fatalf("shard 0 owns %d lanes, want 2", len(st))
	}
	// Shard 1 owns no lane of the peer now: its packets go to shard 0's.
	inject(t, b1, ipPacket("10.2.0.9", "10.1.0.5", 100, 3))
	b1.flushAll()
	if b0.takeMesh() != 1 {
		t.Fatal("shard 1 did not hand its packet to the lanes' shard")
	}
	// Shard 0 sends on a lane it owns.
	inject(t, b0, ipPacket("10.2.0.9", "10.1.0.5", 100, 4))
	b0.flushAll()
	if len(b.sent[0]) != 2 {
		t.Fatalf("shard 0 sent %d datagrams, want 2", len(b.sent[0]))
	}
}

// A datagram handed over by another shard that matches none of the
// receiving shard's lanes is not handed on again, even if it matches a
// candidate (no ping-pong between shards).
func TestHandedDatagramNotHandedAgain(t *testing.T) {
	a, b := newSide(t, 2, routesA), newSide(t, 2, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	d := sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1) // lane 0: shard 0's
	b.shards[1].ingressVia(-1, 0, d.data, netip.MustParseAddrPort("192.0.2.1:61234"))
	b.shards[1].flushAll()
	if n := b.shards[0].takeMesh(); n != 0 {
		t.Fatalf("shard 0 got %d datagrams back", n)
	}
}

// Issue 27, finding 4: each handshake tells the shards that do not own a
// lane its (new) remote. A peer that handshakes from new ports again and
// again leaves at most one hand-over entry per lane on each shard, not one
// per handshake (before: 20,000 handshakes, 20,000 entries).
func TestForeignOneEntryPerLane(t *testing.T) {
	sd := newSide(t, 2, routesA)
	checkAtEnd(t, sd)
	s := sd.shards[1]
	const lanes = 2
	for hs := range 1000 {
		for i := range lanes {
			remote := netip.AddrPortFrom(addrA.Addr(), uint16(10000+hs*lanes+i))
			owner := 0
			if i == 1 {
				owner = 1 // lane 1 is this shard's own: no entry for it
			}
			s.SetLaneOwner(2, lanes, i, owner, remote, nil)
		}
	}
	if n := len(s.table.foreign); n != 1 {
		t.Fatalf("%d hand-over entries after 1000 handshakes of a 2-lane peer, want 1", n)
	}
	want := netip.AddrPortFrom(addrA.Addr(), uint16(10000+999*lanes))
	if f, ok := s.table.foreign[want]; !ok || f.owner != 0 || f.index != 0 {
		t.Fatalf("the entry is not the newest remote's: %v", s.table.foreign)
	}
	// Another peer's entry stays when this peer's lane moves on, and a
	// stale record never deletes an entry another lane took since.
	other := netip.MustParseAddrPort("192.0.2.50:1")
	s.SetLaneOwner(3, lanes, 0, 0, other, nil)
	s.SetLaneOwner(2, lanes, 0, 0, netip.MustParseAddrPort("192.0.2.50:2"), nil)
	if f, ok := s.table.foreign[other]; !ok || f.peer != 3 || len(s.table.foreign) != 2 {
		t.Fatalf("entries %v", s.table.foreign)
	}
}

// A lane that moves between shards keeps its address: the third shard,
// told only the new owner (SetLaneOwner without an address, as the
// control core sends it), hands the lane's datagrams to the new owner,
// not to the shard the lane left.
func TestMoveRepointsHandOverEntry(t *testing.T) {
	a, b := newSide(t, 3, routesA), newSide(t, 3, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	b0, b1, b2 := b.shards[0], b.shards[1], b.shards[2]
	lane1 := b1.ownedLane(1, 1).cfg.Remote
	b1.MoveLane(1, 1, b0)
	b0.runControl()
	b2.SetLaneOwner(1, 3, 1, 0, netip.AddrPort{}, nil)
	if f, ok := b2.table.foreignAt(lane1); !ok || f.owner != 0 {
		t.Fatalf("shard 2's hand-over entry for lane 1 at %s: %+v (present %v), want one naming shard 0", lane1, f, ok)
	}
	checkHandOvers(t, "after the move", b)
}
