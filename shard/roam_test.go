package shard

import (
	"crypto/rand"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

var (
	addrNew  = netip.MustParseAddrPort("203.0.113.9:40000") // where A moved
	addrEvil = netip.MustParseAddrPort("198.51.100.66:999") // an attacker
)

// feed hands one datagram to s as received from from.
func feed(s *Shard, from netip.AddrPort, data []byte) {
	p := s.pool.Get()
	p.N = copy(p.Buf, data)
	s.ingress(0, p.Buf[:p.N], from)
	s.pool.Put(p)
}

// sendOne makes shard s send one inner packet and returns the datagram.
func sendOne(t *testing.T, sd *side, i int, src, dst string, seq int) wireDgram {
	t.Helper()
	inject(t, sd.shards[i], ipPacket(src, dst, 200, seq))
	sd.shards[i].flushAll()
	if len(sd.sent[i]) != 1 {
		t.Fatalf("shard %d sent %d datagrams, want 1", i, len(sd.sent[i]))
	}
	d := sd.sent[i][0]
	sd.sent[i] = nil
	return d
}

// An authenticated datagram from a new address moves the lane there: the
// next reply goes to the new address, and the move is counted.
func TestRoamMovesLane(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sb := b.shards[0]
	feed(sb, addrA, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1).data)
	feed(sb, addrNew, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 2).data)
	if len(b.tun[0]) != 2 {
		t.Fatalf("delivered %d of 2", len(b.tun[0]))
	}
	if d := sendOne(t, b, 0, "10.2.0.9", "10.1.0.5", 3); d.to != addrNew {
		t.Fatalf("reply went to %s, want the new address %s", d.to, addrNew)
	}
	sb.publish()
	if sn := sb.Snapshot(); sn.Get(LaneMoved) != 1 || sn.Get(RoamTrials) != 1 {
		t.Fatalf("lane_moved %d roam_trials %d, want 1 and 1", sn.Get(LaneMoved), sn.Get(RoamTrials))
	}
	if st := sb.LaneStatuses(); len(st) != 1 || st[0].Remote != addrNew || st[0].Moves != 1 {
		t.Fatalf("lane status %+v", st)
	}
	// The old address no longer finds the lane by lookup; traffic from
	// the new one does, without trials.
	feed(sb, addrNew, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 4).data)
	sb.publish()
	if sn := sb.Snapshot(); sn.Get(RoamTrials) != 1 || len(b.tun[0]) != 3 {
		t.Fatalf("after the move: roam_trials %d, delivered %d", sn.Get(RoamTrials), len(b.tun[0]))
	}
}

// A replayed datagram, a parity replay and garbage from another address
// never move the lane, and the peer's traffic goes on at its own address.
func TestRoamRefusesReplayAndForgery(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 2, R: 1})
	sb := b.shards[0]
	d1 := sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1)
	inject(t, a.shards[0], ipPacket("10.1.0.5", "10.2.0.9", 200, 2)) // completes the group: data + parity
	a.shards[0].flushAll()
	rest := a.sent[0]
	a.sent[0] = nil
	feed(sb, addrA, d1.data)
	for _, d := range rest {
		feed(sb, addrA, d.data)
	}
	for _, d := range append([]wireDgram{d1}, rest...) {
		feed(sb, addrEvil, d.data) // replays from elsewhere
	}
	junk := make([]byte, 300)
	rand.Read(junk)
	feed(sb, addrEvil, junk)
	if len(b.tun[0]) != 2 {
		t.Fatalf("delivered %d, want the 2 genuine packets only", len(b.tun[0]))
	}
	sb.publish()
	if sn := sb.Snapshot(); sn.Get(LaneMoved) != 0 {
		t.Fatalf("lane moved %d times on replays", sn.Get(LaneMoved))
	}
	if d := sendOne(t, b, 0, "10.2.0.9", "10.1.0.5", 3); d.to != addrA {
		t.Fatalf("reply went to %s after replays, want %s", d.to, addrA)
	}
	feed(sb, addrA, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 4).data)
	if len(b.tun[0]) != 3 {
		t.Fatalf("the peer's traffic stopped after the replays")
	}
}

// Trials are paid from a token bucket: with none left a moved peer is not
// looked for (the datagram is dropped as from an unknown address); the
// bucket refills with time and the next datagram moves the lane.
func TestRoamTrialBudget(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sb := b.shards[0]
	sb.tick() // starts the refill clock
	sb.roamTokens = 0
	feed(sb, addrNew, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1).data)
	sb.publish()
	if sn := sb.Snapshot(); len(b.tun[0]) != 0 || sn.Get(DropUnknownLane) != 1 || sn.Get(RoamTrials) != 0 {
		t.Fatalf("without tokens: delivered %d, unknown %d, trials %d", len(b.tun[0]), sn.Get(DropUnknownLane), sn.Get(RoamTrials))
	}
	sb.now = sb.now.Add(10 * time.Millisecond)
	sb.tick()
	if sb.roamTokens != roamTrialRate/100 {
		t.Fatalf("%d tokens after 10 ms, want %d", sb.roamTokens, roamTrialRate/100)
	}
	sb.now = sb.now.Add(time.Hour)
	sb.tick()
	if sb.roamTokens != roamTrialBurst {
		t.Fatalf("%d tokens after an hour, want the burst %d", sb.roamTokens, roamTrialBurst)
	}
	feed(sb, addrNew, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 2).data)
	if len(b.tun[0]) != 1 || sb.LaneStatuses()[0].Remote != addrNew {
		t.Fatalf("after the refill: delivered %d, remote %s", len(b.tun[0]), sb.LaneStatuses()[0].Remote)
	}
}

// When one lane moves, the peer's lanes on the other shards follow with
// their own ports (the peer changed address, not sockets).
func TestRoamOtherShardsFollow(t *testing.T) {
	a, b := newSide(t, 2, routesA), newSide(t, 2, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	b.shards[1].cfg.Moved = func(sh int, peer PeerID, index int, from, to netip.AddrPort) {
		b.shards[0].FollowPeer(peer, from.Addr(), to.Addr())
	}
	moved := netip.AddrPortFrom(addrNew.Addr(), addrA.Port()+1)
	feed(b.shards[1], moved, sendOne(t, a, 1, "10.1.0.5", "10.2.0.9", 1).data)
	if len(b.tun[1]) != 1 {
		t.Fatalf("delivered %d", len(b.tun[1]))
	}
	if st := b.shards[0].LaneStatuses(); st[0].Remote != netip.AddrPortFrom(addrNew.Addr(), addrA.Port()) {
		t.Fatalf("lane 0 at %s, want the new address with its own port", st[0].Remote)
	}
	// Lane 0 now finds its datagrams from the new address by lookup.
	feed(b.shards[0], netip.AddrPortFrom(addrNew.Addr(), addrA.Port()), sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 2).data)
	b.shards[0].publish()
	sn := b.shards[0].Snapshot()
	if len(b.tun[0]) != 1 || sn.Get(RoamTrials) != 0 {
		t.Fatalf("lane 0 after following: delivered %d, trials %d", len(b.tun[0]), sn.Get(RoamTrials))
	}
}

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

// A lane idle for laneIdleTrim gives its FEC decoder's memory back; one
// with recent traffic keeps it.
func TestIdleLaneTrimmed(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 1})
	sb := b.shards[0]
	for i := range 3 { // an incomplete group: its symbols stay stored
		feed(sb, addrA, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", i).data)
	}
	ln := sb.table.owned[0]
	if ln.dec.StoredBytes() == 0 {
		t.Fatal("decoder holds nothing after traffic")
	}
	sb.now = sb.now.Add(2 * time.Second)
	sb.tick()
	if ln.dec.StoredBytes() == 0 {
		t.Fatal("trimmed a lane that received 2 s ago")
	}
	sb.now = sb.now.Add(laneIdleTrim)
	sb.tick()
	if ln.dec.StoredBytes() != 0 {
		t.Fatalf("idle lane still holds %d bytes", ln.dec.StoredBytes())
	}
	feed(sb, addrA, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 9).data)
	if len(b.tun[0]) != 4 {
		t.Fatalf("delivered %d of 4", len(b.tun[0]))
	}
}

// A lane that moves again within a second is reported once the rate
// limit allows: the router always learns the lane's last address.
func TestMoveReportNeverLost(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sb := b.shards[0]
	var got []netip.AddrPort
	sb.cfg.Moved = func(sh int, peer PeerID, index int, from, to netip.AddrPort) { got = append(got, to) }
	second := netip.MustParseAddrPort("203.0.113.10:40000")
	feed(sb, addrNew, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1).data)
	sb.now = sb.now.Add(100 * time.Millisecond)
	feed(sb, second, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 2).data)
	if len(got) != 1 || got[0] != addrNew {
		t.Fatalf("reports %v, want only the first move so far", got)
	}
	sb.now = sb.now.Add(time.Second)
	sb.tick()
	if len(got) != 2 || got[1] != second {
		t.Fatalf("reports %v, want the second move reported after the limit", got)
	}
	sb.now = sb.now.Add(2 * time.Second)
	sb.tick()
	if len(got) != 2 {
		t.Fatalf("reported again without a move: %v", got)
	}
}

// Finding (floods issue, 1): a datagram longer than any router sends (up
// to 65,507 bytes with IP fragments) is dropped before any lookup or tag
// work: no roam trial, no call into the router, from a lane's address or
// an unknown one; the lane's traffic flows after it.
func TestOversizeDroppedBeforeTagWork(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sb := b.shards[0]
	sb.tick()
	unmatched := 0
	sb.cfg.Unmatched = func(int, int, []byte, netip.AddrPort, netip.Addr) bool { unmatched++; return false }
	big := make([]byte, 65507)
	rand.Read(big)
	for _, from := range []netip.AddrPort{addrA, addrEvil} {
		sb.ingress(0, big, from)
	}
	sb.publish()
	if sn := sb.Snapshot(); sn.Get(DropOversize) != 2 || sn.Get(RoamTrials) != 0 || unmatched != 0 {
		t.Fatalf("drop_oversize %d roam_trials %d unmatched %d, want 2, 0, 0", sn.Get(DropOversize), sn.Get(RoamTrials), unmatched)
	}
	feed(sb, addrA, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1).data)
	if len(b.tun[0]) != 1 {
		t.Fatalf("delivered %d after the oversize datagrams, want 1", len(b.tun[0]))
	}
}

// A responder's lane reports (Config.Confirmed) the first datagram under
// its new keys, once, with the address the response went to (its remote),
// wherever the datagram came from; only the lane the initiation came from
// (Asked) does: the other lanes' remotes are offered ports our response
// never reached.
func TestConfirmedReportsAskedLane(t *testing.T) {
	remote := netip.MustParseAddrPort("192.0.2.50:40000")
	c := newSide(t, 1, []Route{{netip.MustParsePrefix("10.9.0.0/16"), 9}})
	for _, asked := range []bool{true, false} {
		hub := newSide(t, 1, []Route{{netip.MustParsePrefix("10.1.0.0/16"), 1}})
		sh := hub.shards[0]
		var got []netip.AddrPort
		sh.cfg.Confirmed = func(_ int, p PeerID, i int, r netip.AddrPort) {
			if p != 1 || i != 0 {
				t.Errorf("confirmed peer %d lane %d", p, i)
			}
			got = append(got, r)
		}
		pairLaneAs(t, c, hub, 1, 9, remote, addrB, func(lc *LaneConfig) { lc.HoldTx, lc.Asked = true, asked })
		// The first datagram comes from a rebound port (found by trial).
		sh.tick()
		feed(sh, netip.AddrPortFrom(remote.Addr(), 40001), sendOne(t, c, 0, "10.1.0.5", "10.9.0.1", 1).data)
		feed(sh, remote, sendOne(t, c, 0, "10.1.0.5", "10.9.0.1", 2).data)
		if len(hub.tun[0]) != 2 {
			t.Fatalf("asked=%v: delivered %d, want 2", asked, len(hub.tun[0]))
		}
		want := []netip.AddrPort{remote}
		if !asked {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("asked=%v: confirmed %v, want %v", asked, got, want)
		}
	}
}
