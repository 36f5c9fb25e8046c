package shard

import (
	"crypto/rand"
	"net/netip"
	"slices"
	"testing"
	"time"

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
	checkAtEnd(t, a, b)
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
	checkAtEnd(t, a, b)
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
	checkAtEnd(t, a, b)
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
	checkAtEnd(t, a, b)
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

// A lane idle for laneIdleTrim gives its FEC decoder's memory back; one
// with recent traffic keeps it.
func TestIdleLaneTrimmed(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 1})
	sb := b.shards[0]
	for i := range 3 { // an incomplete group: its symbols stay stored
		feed(sb, addrA, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", i).data)
	}
	ln := sb.table.owned[0]
	if ln.cur.dec.StoredBytes() == 0 {
		t.Fatal("decoder holds nothing after traffic")
	}
	sb.now = sb.now.Add(2 * time.Second)
	sb.tick()
	if ln.cur.dec.StoredBytes() == 0 {
		t.Fatal("trimmed a lane that received 2 s ago")
	}
	sb.now = sb.now.Add(laneIdleTrim)
	sb.tick()
	if ln.cur.dec.StoredBytes() != 0 {
		t.Fatalf("idle lane still holds %d bytes", ln.cur.dec.StoredBytes())
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
	checkAtEnd(t, a, b)
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
	checkAtEnd(t, a, b)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sb := b.shards[0]
	sb.tick()
	unmatched := 0
	sb.cfg.Unmatched = func(int, int, []byte, netip.AddrPort, netip.Addr) Verdict { unmatched++; return NotHandshake }
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
		checkAtEnd(t, hub)
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
