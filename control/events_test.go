package control

import (
	"net/netip"
	"testing"
)

// A lane moved by an authenticated datagram: the endpoint for handshakes
// follows the endpoint's lane, or the peer's new IP; a new IP makes the
// peer's lanes on the other shards follow; a port change alone does not.
func TestPeerMovedEndpoint(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	handshake(t, ini, resp)
	p := resp.peerOf(t)
	ep := func() netip.AddrPort {
		var e netip.AddrPort
		resp.locked(func() { e = p.endpoint })
		return e
	}
	var lane int
	resp.locked(func() { lane = p.endpointLane })
	if ep() != ini.addr {
		t.Fatalf("endpoint %s, want %s", ep(), ini.addr)
	}

	// The endpoint's lane moves (new IP and port): the endpoint follows,
	// the other shards' lanes follow the IP.
	to := netip.MustParseAddrPort("203.0.113.5:41000")
	resp.FollowMoved(0, p.id, lane, ini.addr, to)
	resp.PeerMoved(0, p.id, lane, ini.addr, to)
	resp.Step()
	if ep() != to || len(resp.plane.follows) != 1 || resp.plane.follows[0] != 0 {
		t.Fatalf("endpoint %s, follows %v", ep(), resp.plane.follows)
	}
	if _, ok := resp.known.Load(to.Addr()); ok {
		// The peer's keys prove the datagram is its own, not where it
		// is: any peer could so make any address known.
		t.Fatal("a roam made the new address known (cookie replies to it would skip the cap)")
	}

	// Another lane moves to a new IP: the endpoint takes the IP, keeps
	// its port.
	to2 := netip.MustParseAddrPort("203.0.113.9:50000")
	resp.PeerMoved(1, p.id, lane+1, netip.AddrPortFrom(to.Addr(), 40001), to2)
	resp.Step()
	if want := netip.AddrPortFrom(to2.Addr(), to.Port()); ep() != want {
		t.Fatalf("endpoint %s, want %s", ep(), want)
	}

	// A port change of another lane (a NAT rebinding): nothing follows,
	// the endpoint stays.
	before, follows := ep(), len(resp.plane.follows)
	resp.FollowMoved(0, p.id, lane+1, netip.AddrPortFrom(to2.Addr(), 40001), netip.AddrPortFrom(to2.Addr(), 40002))
	resp.PeerMoved(0, p.id, lane+1, netip.AddrPortFrom(to2.Addr(), 40001), netip.AddrPortFrom(to2.Addr(), 40002))
	resp.Step()
	if ep() != before || len(resp.plane.follows) != follows {
		t.Fatalf("port change moved the endpoint to %s or lanes (%d follows)", ep(), len(resp.plane.follows)-follows)
	}
	// A move from an address the peer is not at, and one for a peer that
	// is gone, change nothing.
	resp.PeerMoved(0, p.id, lane+1, netip.MustParseAddrPort("192.0.2.77:1"), netip.MustParseAddrPort("192.0.2.77:2"))
	resp.Step()
	resp.PeerMoved(0, p.id+9, lane, before, to)
	resp.Step()
	if ep() != before {
		t.Fatalf("endpoint %s after unrelated moves", ep())
	}
}

// A responder's lane whose datagrams arrive on another shard moves there;
// every other shard learns the new owner, and the placement survives a
// rekey. Initiators' lanes and stale reports do not move.
func TestLaneMisplacedMovesAndSticks(t *testing.T) {
	ini, resp := memPairShards(t, "198.51.100.7:40000", 3, 3)
	clock := ini.clock
	// steer delivers ini's initiations where the responder's steering
	// would: lane k's socket to shard k.
	steer := func() {
		for _, d := range ini.take() {
			resp.Unmatched(d.sh, ConnGroup, d.b, netip.AddrPortFrom(ini.addr.Addr(), ini.plane.lanePorts[d.sh]), netip.Addr{})
		}
		for _, d := range resp.take() {
			ini.Unmatched(0, ConnLane, d.b, resp.addr, netip.Addr{})
		}
	}
	ini.kick(t)
	steer()
	rp, ip := resp.peerOf(t).id, ini.peerOf(t).id
	if resp.peerOf(t).sess == nil || ini.peerOf(t).sess == nil {
		t.Fatal("no session")
	}
	lane := 1
	from := resp.plane.owner[laneAt{rp, lane}]
	via := (from + 1) % 3
	other := 3 - from - via

	resp.LaneMisplaced(from, rp, lane, via)
	resp.Step()
	if resp.plane.owner[laneAt{rp, lane}] != via || len(resp.plane.moved) != 1 {
		t.Fatalf("lane on shard %d after the move (moves %v)", resp.plane.owner[laneAt{rp, lane}], resp.plane.moved)
	}
	// Stale (the lane is no longer on from), out of range, unknown peer,
	// and the initiator's lanes: nothing moves.
	resp.LaneMisplaced(from, rp, lane, other)
	resp.Step()
	resp.LaneMisplaced(via, rp, lane, 7)
	resp.Step()
	resp.LaneMisplaced(via, rp+5, lane, other)
	resp.Step()
	ini.LaneMisplaced(lane, ip, lane, (lane+1)%3)
	ini.Step()
	if len(resp.plane.moved) != 1 || len(ini.plane.moved) != 0 {
		t.Fatalf("moves: responder %v, initiator %v", resp.plane.moved, ini.plane.moved)
	}

	// A rekey keeps the lane where it moved, unless the rekey's
	// initiation came from that lane's own socket: then its datagrams
	// arrive where that initiation did.
	clock.Advance(DefaultRekeyAfter + DefaultRekeyAfter/rekeyJitterDiv + TimerPeriod)
	ini.Tick(clock.Now())
	out := ini.take()
	if len(out) != 1 {
		t.Fatalf("rekey: %d initiations", len(out))
	}
	k := out[0].sh
	ini.plane.out = out
	steer()
	if resp.hs.answered.Load() != 2 {
		t.Fatal("no rekey")
	}
	want := via
	if k == lane {
		want = k
	}
	if o := resp.plane.owner[laneAt{rp, lane}]; o != want {
		t.Fatalf("after a rekey initiated from lane %d, lane %d is on shard %d, want %d", k, lane, o, want)
	}
}
