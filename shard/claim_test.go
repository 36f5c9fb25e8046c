package shard

// The address rule (claim.go): one owner per address, whichever shard the
// lanes that want it live on.

import (
	"crypto/rand"
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// pairLane installs one lane between shard 0 of a (knowing b as bPeer, at
// bAddr) and shard 0 of b (knowing a as aPeer, at aAddr) with fresh keys.
func pairLane(t *testing.T, a, b *side, aPeer, bPeer PeerID, aAddr, bAddr netip.AddrPort) {
	t.Helper()
	pairLaneAs(t, a, b, aPeer, bPeer, aAddr, bAddr, func(*LaneConfig) {})
}

// pairLaneAs is pairLane with b's lane config adjusted by bCfg (a
// responder's HoldTx, an initiator's Proven).
func pairLaneAs(t *testing.T, a, b *side, aPeer, bPeer PeerID, aAddr, bAddr netip.AddrPort, bCfg func(*LaneConfig)) {
	t.Helper()
	var k1, k2 [32]byte
	rand.Read(k1[:])
	rand.Read(k2[:])
	ka, kb := crypto.NewSessionKeys(k1, k2, true), crypto.NewSessionKeys(k1, k2, false)
	for _, x := range []struct {
		sd     *side
		keys   crypto.SessionKeys
		peer   PeerID
		remote netip.AddrPort
	}{{a, ka, bPeer, bAddr}, {b, kb, aPeer, aAddr}} {
		cfg := LaneConfig{
			Peer: x.peer, Index: 0, Lanes: 1, Remote: x.remote, Conn: 0,
			Send: x.keys.SendLane(0), Recv: x.keys.RecvLane(0), FEC: fec.EncoderConfig{K: 4},
		}
		if x.sd == b {
			bCfg(&cfg)
		}
		if err := x.sd.shards[0].InstallLane(cfg); err != nil {
			t.Fatal(err)
		}
	}
}

// Finding (floods issue, 3): peer X, authenticated under its own keys,
// sends datagrams with peer C's source address. They are X's and are
// delivered, but X's lane does not take C's address while C is heard
// there: C's datagrams keep finding C's lane by lookup, even with no trial
// budget left (a garbage flood drains it). After C has been silent for
// addrHold (longer than a rekey period; idle for less, C keeps it) X may
// take the address; C's next completed handshake from it
// wins it back, as does an initiator's handshake answered from where it
// asked.
func TestAddressHasOneOwner(t *testing.T) {
	shared := netip.MustParseAddrPort("192.0.2.50:40000")
	xHome := netip.MustParseAddrPort("198.51.100.3:40000")
	routes := []Route{{netip.MustParsePrefix("10.1.0.0/16"), 1}, {netip.MustParsePrefix("10.3.0.0/16"), 3}}
	hub := newSide(t, 1, routes)
	c := newSide(t, 1, []Route{{netip.MustParsePrefix("10.9.0.0/16"), 9}})
	x := newSide(t, 1, []Route{{netip.MustParsePrefix("10.9.0.0/16"), 9}})
	checkAtEnd(t, hub, c, x)
	pairLane(t, c, hub, 1, 9, shared, addrB) // C, the victim, at shared
	pairLane(t, x, hub, 3, 9, xHome, addrB)  // X at its own address
	sh := hub.shards[0]
	sh.tick() // starts the trial budget's refill clock
	want, seq := 0, 0
	fromC := func(what string, n int) {
		t.Helper()
		for range n {
			seq++
			feed(sh, shared, sendOne(t, c, 0, "10.1.0.5", "10.9.0.1", seq).data)
		}
		want += n
		if len(hub.tun[0]) != want {
			t.Fatalf("%s: delivered %d, want %d", what, len(hub.tun[0]), want)
		}
	}
	fromX := func(what string) {
		t.Helper()
		seq++
		feed(sh, shared, sendOne(t, x, 0, "10.3.0.5", "10.9.0.1", seq).data)
		want++
		if len(hub.tun[0]) != want {
			t.Fatalf("%s: X's datagram not delivered", what)
		}
	}
	owner := func(what string, peer PeerID) {
		t.Helper()
		checkTables(t, what, hub, true)
		if got := sh.table.lanes[shared].cfg.Peer; got != peer {
			t.Fatalf("%s: %s held by peer %d, want %d", what, shared, got, peer)
		}
	}
	fromC("C before", 1)
	for range 20 {
		fromX("X spoofing C's address")
	}
	owner("after X's datagrams", 1)
	sh.roamTokens = 0 // a flood drained the trial budget
	fromC("C after X's datagrams, no trial budget", 200)
	sh.publish()
	if sn := sh.Snapshot(); sn.Get(LaneMoveRefused) != 20 || sn.Get(LaneMoved) != 0 {
		t.Fatalf("lane_move_refused %d lane_moved %d, want 20 and 0", sn.Get(LaneMoveRefused), sn.Get(LaneMoved))
	}
	if d := sendOne(t, hub, 0, "10.9.0.1", "10.3.0.5", 1); d.to != xHome {
		t.Fatalf("reply to X went to %s, want its own address %s", d.to, xHome)
	}

	// C idle for a minute: an idle lane hears nothing between rekeys (a
	// keepalive asks for no answer), and keeps its address.
	sh.now = sh.now.Add(time.Minute)
	sh.tick()
	fromX("X after C idled a minute")
	owner("after C idled a minute", 1)

	// C silent for addrHold: the address was left, X may take it.
	sh.now = sh.now.Add(addrHold + time.Second)
	sh.tick()
	fromX("X after C fell silent")
	owner("after C's silence", 3)

	// A session's lane whose remote is only an offered port (not where
	// the initiation came from, so not where our response went) proves
	// nothing by its first datagram: X keeps the address.
	pairLaneAs(t, c, hub, 1, 9, shared, addrB, func(lc *LaneConfig) { lc.HoldTx = true })
	owner("after C's initiation alone", 3)
	fromC("C's first datagram on a lane it was not asked on", 1)
	owner("after a first datagram on an offered port", 3)

	// C handshakes again from the address (hub responds: HoldTx; the
	// initiation came from there: Asked) and its first datagram under the
	// new keys, found by trial, wins it back.
	pairLaneAs(t, c, hub, 1, 9, shared, addrB, func(lc *LaneConfig) { lc.HoldTx, lc.Asked = true, true })
	owner("after C's initiation alone", 3)
	fromC("C's first datagram after its handshake", 1)
	owner("after C's completed handshake", 1)
	fromX("X spoofing again")
	owner("after X's new datagram", 1)

	// X's handshake answered from the shared address (hub initiated to
	// it there) takes it at once: X is really behind it.
	pairLaneAs(t, x, hub, 3, 9, shared, addrB, func(lc *LaneConfig) { lc.Proven = true })
	owner("after X's proven handshake", 3)
}

// The rule holds across shards: X's lane on shard 1 proving C's address,
// which shard 0's lane of C holds (shard 1 has C's hand-over entry there),
// does not take it.
func TestAddressOwnerOnAnotherShard(t *testing.T) {
	shared := netip.MustParseAddrPort("192.0.2.50:40000")
	xHome := netip.MustParseAddrPort("198.51.100.3:40000")
	routes := []Route{{netip.MustParsePrefix("10.1.0.0/16"), 1}, {netip.MustParsePrefix("10.3.0.0/16"), 3}}
	hub := newSide(t, 2, routes)
	c := newSide(t, 1, []Route{{netip.MustParsePrefix("10.9.0.0/16"), 9}})
	x := newSide(t, 1, []Route{{netip.MustParsePrefix("10.9.0.0/16"), 9}})
	checkAtEnd(t, hub, c, x)
	var k1, k2 [32]byte
	rand.Read(k1[:])
	rand.Read(k2[:])
	install := func(sd *side, sh int, peer PeerID, remote netip.AddrPort, keys crypto.SessionKeys) {
		t.Helper()
		if err := sd.shards[sh].InstallLane(LaneConfig{
			Peer: peer, Index: 0, Lanes: 1, Remote: remote, Conn: 0,
			Send: keys.SendLane(0), Recv: keys.RecvLane(0), FEC: fec.EncoderConfig{K: 4},
		}); err != nil {
			t.Fatal(err)
		}
		for j, s := range sd.shards {
			if j != sh {
				recv := keys.RecvLane(0)
				s.SetLaneOwner(peer, 1, 0, sh, remote, &recv)
			}
		}
	}
	install(c, 0, 9, addrB, crypto.NewSessionKeys(k1, k2, true))
	install(hub, 0, 1, shared, crypto.NewSessionKeys(k1, k2, false))
	rand.Read(k1[:])
	install(x, 0, 9, addrB, crypto.NewSessionKeys(k1, k2, true))
	install(hub, 1, 3, xHome, crypto.NewSessionKeys(k1, k2, false))
	s1 := hub.shards[1]
	if _, ok := s1.table.foreign[shared]; !ok {
		t.Fatal("shard 1 has no hand-over entry for C's lane")
	}
	// As if shard 0 received it and handed it over by X's candidate keys.
	d := sendOne(t, x, 0, "10.3.0.5", "10.9.0.1", 1).data
	s1.ingressVia(-1, 0, d, shared)
	if len(hub.tun[1]) != 1 {
		t.Fatalf("X's datagram: delivered %d, want 1", len(hub.tun[1]))
	}
	if f, ok := s1.table.foreign[shared]; !ok || f.peer != 1 || s1.table.lanes[shared] != nil {
		t.Fatalf("shard 1 gave C's address to X: foreign %+v ok %v lane %v", f, ok, s1.table.lanes[shared] != nil)
	}
	if st := s1.LaneStatuses(); st[0].Remote != xHome {
		t.Fatalf("X's lane moved to %s", st[0].Remote)
	}

	// C's lane moves (a NAT gave it a new port): shard 1 learns it
	// (FollowLane, as the router relays Config.Moved) and the new
	// address is C's there too.
	rebound := netip.AddrPortFrom(shared.Addr(), shared.Port()+1)
	feed(hub.shards[0], rebound, sendOne(t, c, 0, "10.1.0.5", "10.9.0.1", 1).data)
	if st := hub.shards[0].LaneStatuses(); st[0].Remote != rebound {
		t.Fatalf("C's lane at %s after its NAT rebinding, want %s", st[0].Remote, rebound)
	}
	s1.FollowLane(1, 0, rebound)
	if f, ok := s1.table.foreign[rebound]; !ok || f.peer != 1 {
		t.Fatalf("shard 1 has no hand-over entry for C's new address")
	}
	if _, ok := s1.table.foreign[shared]; ok {
		t.Fatalf("shard 1 kept C's old hand-over entry")
	}
	s1.ingressVia(-1, 0, sendOne(t, x, 0, "10.3.0.5", "10.9.0.1", 2).data, rebound)
	if s1.table.lanes[rebound] != nil || s1.LaneStatuses()[0].Remote != xHome {
		t.Fatalf("X took C's new address on shard 1")
	}
}

// installOn installs lane 0 of a one-lane session of peer on shard sh of
// sd at remote (cfg adjusts the config: Proven, HoldTx), with keys, and
// tells the other shards its owner but not its address, so only the
// owner's own news (claim.go's announce) tells them where it is.
func installOn(t *testing.T, sd *side, sh int, peer PeerID, remote netip.AddrPort, keys crypto.SessionKeys, cfg func(*LaneConfig)) {
	t.Helper()
	lc := LaneConfig{
		Peer: peer, Index: 0, Lanes: 1, Remote: remote, Conn: 0,
		Send: keys.SendLane(0), Recv: keys.RecvLane(0), FEC: fec.EncoderConfig{K: 4},
	}
	cfg(&lc)
	if err := sd.shards[sh].InstallLane(lc); err != nil {
		t.Fatal(err)
	}
	for j, s := range sd.shards {
		if j != sh {
			recv := keys.RecvLane(0)
			s.SetLaneOwner(peer, 1, 0, sh, netip.AddrPort{}, &recv)
		}
	}
}

// runQueued runs every command queued on sd's shards, and what those
// queue, until none is left.
func runQueued(sd *side) {
	for more := true; more; {
		more = false
		for _, s := range sd.shards {
			if s.ctlPending.Load() > 0 {
				s.runControl()
				more = true
			}
		}
	}
}

// Across shards: a completed handshake on one shard takes the address
// from another peer's lane on another shard (its news reaches that shard:
// the lane there gives the address up), and every shard's hand-over
// entry then names the new holder.
func TestHandshakeWinsAddressAcrossShards(t *testing.T) {
	shared := netip.MustParseAddrPort("192.0.2.50:40000")
	hub := newSide(t, 3, routesB)
	checkAtEnd(t, hub)
	var k1, k2 [32]byte
	rand.Read(k1[:])
	// Peer 2 installed at shared on shard 1 (a responder's unproven install).
	installOn(t, hub, 1, 2, shared, crypto.NewSessionKeys(k1, k2, false), func(*LaneConfig) {})
	runQueued(hub)
	if hub.shards[1].table.laneAt(shared) == nil {
		t.Fatal("peer 2's lane did not take the free address")
	}
	// Peer 1's handshake completes from shared on shard 0 (initiator:
	// the response came from where the initiation went).
	rand.Read(k1[:])
	installOn(t, hub, 0, 1, shared, crypto.NewSessionKeys(k1, k2, false), func(lc *LaneConfig) { lc.Proven = true })
	runQueued(hub)
	checkAddrOwners(t, "after the handshake", hub)
	if ln := hub.shards[0].table.laneAt(shared); ln == nil || ln.cfg.Peer != 1 {
		t.Fatal("the handshake's lane does not hold the address")
	}
	if hub.shards[1].table.laneAt(shared) != nil {
		t.Fatal("peer 2's lane on shard 1 kept the address a handshake won")
	}
	for _, i := range []int{1, 2} {
		if f, ok := hub.shards[i].table.foreignAt(shared); !ok || f.peer != 1 || f.owner != 0 {
			t.Fatalf("shard %d's hand-over entry at %s: %+v (present %v), want peer 1's on shard 0", i, shared, f, ok)
		}
	}
	checkHandOvers(t, "after the handshake", hub)
}

// Two claims that crossed (neither shard had heard of the other's lane at
// the address): a proven datagram of peer X on shard 1 from the address
// peer C's lane on shard 0 was installed at does not take it; C's lane
// keeps it on every shard, and X's lane gives it up.
func TestCrossedDatagramClaimLosesToHolder(t *testing.T) {
	shared := netip.MustParseAddrPort("192.0.2.50:40000")
	xHome := netip.MustParseAddrPort("198.51.100.3:40000")
	routes := []Route{{netip.MustParsePrefix("10.1.0.0/16"), 1}, {netip.MustParsePrefix("10.3.0.0/16"), 3}}
	hub := newSide(t, 2, routes)
	x := newSide(t, 1, []Route{{netip.MustParsePrefix("10.9.0.0/16"), 9}})
	checkAtEnd(t, hub, x)
	var k1, k2 [32]byte
	rand.Read(k1[:])
	installOn(t, hub, 0, 1, shared, crypto.NewSessionKeys(k1, k2, false), func(*LaneConfig) {})
	rand.Read(k1[:])
	installOn(t, x, 0, 9, addrB, crypto.NewSessionKeys(k1, k2, true), func(*LaneConfig) {})
	installOn(t, hub, 1, 3, xHome, crypto.NewSessionKeys(k1, k2, false), func(*LaneConfig) {})
	// Shard 1 has not run C's news yet: X's datagram from shared moves
	// X's lane there.
	s1 := hub.shards[1]
	feed(s1, shared, sendOne(t, x, 0, "10.3.0.5", "10.9.0.1", 1).data)
	if ln := s1.table.laneAt(shared); ln == nil || ln.cfg.Peer != 3 {
		t.Fatal("X's datagram did not move its lane (the race this test needs)")
	}
	runQueued(hub)
	checkAddrOwners(t, "after the news", hub)
	if ln := hub.shards[0].table.laneAt(shared); ln == nil || ln.cfg.Peer != 1 {
		t.Fatal("C's lane lost its address to a datagram claim")
	}
	if s1.table.laneAt(shared) != nil {
		t.Fatal("X's lane kept C's address")
	}
	if f, ok := s1.table.foreignAt(shared); !ok || f.peer != 1 {
		t.Fatalf("shard 1's hand-over entry at %s: %+v (present %v), want C's", shared, f, ok)
	}
}

// A hand-over entry the control core hints at (SetLaneOwner's remote: a
// handshake's source, unproven) never replaces another peer's entry at
// the address.
func TestHintKeepsOtherPeersEntry(t *testing.T) {
	sd := newSide(t, 2, routesA)
	checkAtEnd(t, sd)
	s := sd.shards[1]
	shared := netip.MustParseAddrPort("192.0.2.50:1")
	s.SetLaneOwner(3, 1, 0, 0, shared, nil)
	s.SetLaneOwner(2, 1, 0, 0, shared, nil)
	if f, ok := s.table.foreignAt(shared); !ok || f.peer != 3 {
		t.Fatalf("entry at %s: %+v (present %v), want peer 3's", shared, f, ok)
	}
	if err := s.table.check(); err != nil {
		t.Fatal(err)
	}
}
