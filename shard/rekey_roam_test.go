package shard

import (
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// A rekey responder waiting for the initiator to use the new keys sends
// under the old ones; its keepalive timer must still see that it sent (a
// timer that missed those sends would fire on every tick).
func TestNoKeepaliveStormWhileUnconfirmed(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	connectHold(t, a, b, fec.EncoderConfig{K: 4, R: 0}, true) // rekey; B holds
	sb := b.shards[0]
	sb.SetKeepalive(1, 25*time.Second)
	if n := len(controlSends(sb, 10*time.Second)); n > 2 {
		t.Fatalf("%d control frames in 10 s with a 25 s keepalive while unconfirmed", n)
	}
}

// After a rekey the initiator hears the responder under the old keys; that
// counts as hearing it, so its passive keepalive goes out under the new
// keys and the responder switches to them (else one-way traffic from the
// responder was lost after the next rekey).
func TestPassiveKeepaliveConfirmsRekey(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	connectHold(t, a, b, fec.EncoderConfig{K: 4, R: 0}, true)
	sa, sb := a.shards[0], b.shards[0]
	feed(sa, addrB, sendOne(t, b, 0, "10.2.0.9", "10.1.0.5", 1).data) // under the old keys
	if len(a.tun[0]) != 1 {
		t.Fatal("A did not open B's datagram under the old keys")
	}
	at := controlSends(sa, 3*time.Second)
	if len(at) == 0 {
		t.Fatal("A sent no keepalive after hearing B under the old keys")
	}
	deliverAll(t, a, b, nil)
	if ln := sb.table.owned[0]; !ln.cur.confirmed {
		t.Fatal("B still waits for A to use the new keys")
	}
}

// A rekey that offers the same lane port keeps the address the lane proved
// since (a NAT's rewritten port), instead of going back to the offered
// port the NAT does not map.
func TestRekeyKeepsProvenNATPort(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sb := b.shards[0]
	natted := netip.MustParseAddrPort("192.0.2.1:61234")
	feed(sb, natted, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1).data)
	if sb.table.owned[0].cfg.Remote != natted {
		t.Fatal("the lane did not learn the NAT's port")
	}
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0}) // rekey, same offered port
	if got := sb.table.owned[0].cfg.Remote; got != natted {
		t.Fatalf("after the rekey the lane talks to %s, want the proven %s", got, natted)
	}
	if d := sendOne(t, b, 0, "10.2.0.9", "10.1.0.5", 2); d.to != natted {
		t.Fatalf("B sent to %s", d.to)
	}
}

// When one lane proves a new address, a lane that heard from its own
// address just now stays there while it keeps hearing from it (a peer
// whose lanes leave through two public addresses must not make them flip
// back and forth), and follows once it falls silent (a renumbering).
func TestFollowWaitsForSilence(t *testing.T) {
	a, b := newSide(t, 2, routesA), newSide(t, 2, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	b0 := b.shards[0]
	lane0 := netip.AddrPortFrom(addrA.Addr(), addrA.Port())
	moved := netip.AddrPortFrom(addrNew.Addr(), lane0.Port())
	step := func(d time.Duration) {
		b0.now = b0.now.Add(d)
		b0.tick()
	}
	feed(b0, lane0, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1).data)
	b0.FollowPeer(1, addrA.Addr(), addrNew.Addr())
	step(100 * time.Millisecond)
	feed(b0, lane0, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 2).data) // still hears there
	step(time.Second)
	if got := b0.table.owned[0].cfg.Remote; got != lane0 {
		t.Fatalf("a lane that kept hearing from %s was moved to %s", lane0, got)
	}
	b0.FollowPeer(1, addrA.Addr(), addrNew.Addr()) // quiet for 1 s: at once
	if got := b0.table.owned[0].cfg.Remote; got != moved {
		t.Fatalf("a quiet lane did not follow: %s", got)
	}
	// Back, heard, proposed again, then silence: it follows after followQuiet.
	b0.MoveRemote(1, moved, lane0)
	feed(b0, lane0, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 3).data)
	b0.FollowPeer(1, addrA.Addr(), addrNew.Addr())
	step(followQuiet / 2)
	if got := b0.table.owned[0].cfg.Remote; got != lane0 {
		t.Fatalf("moved before followQuiet: %s", got)
	}
	step(followQuiet)
	if got := b0.table.owned[0].cfg.Remote; got != moved {
		t.Fatalf("a lane silent since the proposal did not follow: %s", got)
	}
	b0.publish()
	sn := b0.Snapshot()
	if n := sn.Get(LaneMoved); n != 2 { // two follows; the operator's move is not counted
		t.Fatalf("lane_moved %d, want 2", n)
	}
}

// A rekey whose initiation came from another lane gives this lane its
// offered port again, as offered; the port the lane proved since (a NAT's)
// must stay, for its previous keys too.
func TestRekeyFromOtherLaneKeepsNATPort(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sb := b.shards[0]
	ln := sb.table.owned[0]
	natted := netip.MustParseAddrPort("192.0.2.1:61234")
	// Session 1: this lane sent the initiation; the router gave the
	// observed source as Remote and the offered address as Offered.
	cfg := ln.cfg
	cfg.Remote, cfg.Offered = natted, addrA
	if err := sb.InstallLane(cfg); err != nil {
		t.Fatal(err)
	}
	// Session 2: another lane sent it; this one gets its offered port.
	// B holds: it sends under its previous keys until A uses the new.
	cfg = sb.table.owned[0].cfg
	cfg.Remote, cfg.Offered, cfg.HoldTx = addrA, netip.AddrPort{}, true
	if err := sb.InstallLane(cfg); err != nil {
		t.Fatal(err)
	}
	if got := sb.table.owned[0].cfg.Remote; got != natted {
		t.Fatalf("after a rekey from another lane the lane talks to %s, want %s", got, natted)
	}
	if sb.table.owned[0].prev == nil {
		t.Fatal("no previous keys after the rekey")
	}
	if d := sendOne(t, b, 0, "10.2.0.9", "10.1.0.5", 1); d.to != natted {
		t.Fatalf("under its previous keys the lane sends to %s", d.to)
	}
}

// A lane moved between shards is not adopted if a rekey placed it
// elsewhere meanwhile: two shards never own one lane.
func TestAdoptRefusesAfterNewerPlacement(t *testing.T) {
	a, b := newSide(t, 3, routesA), newSide(t, 3, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	b0, b1 := b.shards[0], b.shards[1]
	b0.MoveLane(1, 0, b1) // queued on b1 as adoptLane
	// A rekey placed lane 0 on shard 2; b1 hears of it first.
	b1.SetLaneOwner(1, 3, 0, 2, netip.AddrPort{}, nil)
	b1.runControl()
	if n := len(b1.LaneStatuses()); n != 1 {
		t.Fatalf("shard 1 owns %d lanes after a stale adoption, want only its own", n)
	}
}

// A follow proposed to a lane that then got there another way (here the
// operator's move) is no move when its quiet time is up: nothing counted.
func TestFollowPendingNoOpNotCounted(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	b0 := b.shards[0]
	moved := netip.AddrPortFrom(addrNew.Addr(), addrA.Port())
	feed(b0, addrA, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1).data)
	b0.FollowPeer(1, addrA.Addr(), addrNew.Addr()) // heard just now: proposed
	b0.MoveRemote(1, addrA, moved)
	b0.now = b0.now.Add(2 * followQuiet)
	b0.tick()
	if got := b0.table.owned[0].cfg.Remote; got != moved {
		t.Fatalf("lane at %s, want %s", got, moved)
	}
	b0.publish()
	sn := b0.Snapshot()
	if n, m := sn.Get(LaneMoved), b0.table.owned[0].moves; n != 0 || m != 0 {
		t.Fatalf("lane_moved %d, lane moves %d after a follow to where the lane already was, want 0", n, m)
	}
}

// A lane moved between shards is not adopted if a rekey placed the
// lane's new keys on the shard it left (an initiator's rekey places lanes
// anew): the adopting shard, told of the new keys first, keeps no second
// owner of the lane.
func TestAdoptRefusesOlderKeys(t *testing.T) {
	a, b := newSide(t, 3, routesA), newSide(t, 3, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	b0, b1 := b.shards[0], b.shards[1]
	b0.MoveLane(1, 0, b1) // queued on b1 as adoptLane
	// The rekey: lane 0's new keys on shard 0 again, shard 1 told first.
	var k1, k2 [32]byte
	k1[0] = 7
	keys := crypto.NewSessionKeys(k1, k2, false)
	recv := keys.RecvLane(0)
	if err := b0.InstallLane(LaneConfig{Peer: 1, Index: 0, Lanes: 3, Remote: addrA, Send: keys.SendLane(0), Recv: recv, FEC: fec.EncoderConfig{K: 4}}); err != nil {
		t.Fatal(err)
	}
	b1.SetLaneOwner(1, 3, 0, 0, addrA, &recv)
	b1.runControl()
	if ln := b1.ownedLane(1, 0); ln != nil {
		t.Fatal("shard 1 adopted the old keys' lane 0, which shard 0 owns with the new keys")
	}
}
