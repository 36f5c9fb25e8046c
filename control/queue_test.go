package control

import (
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/config"
)

// The shards' event methods return at once while the core's lock is held
// (a handshake being installed, a reload, a long tick): a shard never
// waits for the control plane.
func TestEventsDoNotWaitForTheLock(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	handshake(t, ini, resp)
	p := resp.peerOf(t)
	to := netip.MustParseAddrPort("203.0.113.5:41000")
	events := map[string]func(){
		"NoSession":     func() { resp.NoSession(0, p.id) },
		"PeerMoved":     func() { resp.PeerMoved(0, p.id, 0, ini.addr, to) },
		"FollowMoved":   func() { resp.FollowMoved(0, p.id, 0, ini.addr, to) },
		"PeerSilent":    func() { resp.PeerSilent(0, p.id, false) },
		"LaneMisplaced": func() { resp.LaneMisplaced(0, p.id, 0, 0) },
		"LaneConfirmed": func() { resp.LaneConfirmed(0, p.id, 0, to) },
	}
	resp.mu.Lock()
	locked := true
	defer func() {
		if locked {
			resp.mu.Unlock()
		}
	}()
	for name, f := range events {
		done := make(chan struct{})
		go func() {
			f()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s waited for the core lock", name)
		}
	}
	resp.mu.Unlock()
	locked = false
	// Applied by the control loop, in order.
	resp.Step()
	var ep netip.AddrPort
	resp.locked(func() { ep = p.endpoint })
	if ep != to {
		t.Fatalf("endpoint %s after the queued move, want %s", ep, to)
	}
}

// A full queue costs a shard nothing: the events its shard repeats are
// dropped and counted; moves and confirmations, reported once, are held
// and coalesced (a chain of moves arrives as one), never lost.
func TestFullQueueDropsAndCounts(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	handshake(t, ini, resp)
	p := resp.peerOf(t)
	var lane int
	resp.locked(func() { lane = p.endpointLane })
	for range eventQueueCap {
		resp.NoSession(0, p.id)
	}
	if n := resp.EventsDropped(); n != 0 {
		t.Fatalf("%d dropped before the queue was full", n)
	}
	mid := netip.MustParseAddrPort("203.0.113.5:41000")
	to := netip.MustParseAddrPort("203.0.113.6:42000")
	proven := netip.MustParseAddrPort("203.0.113.7:43000")
	resp.NoSession(0, p.id)
	resp.PeerSilent(0, p.id, false)
	resp.LaneMisplaced(0, p.id, lane, 0)
	resp.PeerMoved(0, p.id, lane, ini.addr, mid)
	resp.PeerMoved(0, p.id, lane, mid, to)
	resp.LaneConfirmed(0, p.id, lane, proven)
	if n := resp.EventsDropped(); n != 3 {
		t.Fatalf("%d events dropped, want 3 (NoSession, PeerSilent, LaneMisplaced)", n)
	}
	select {
	case <-resp.Wake():
	default:
		t.Fatal("no wake-up for the queued events")
	}
	resp.Step()
	var ep netip.AddrPort
	resp.locked(func() { ep = p.endpoint })
	if ep != to {
		t.Fatalf("endpoint %s after held moves %s → %s → %s, want %s", ep, ini.addr, mid, to, to)
	}
	if _, ok := resp.known.Load(proven.Addr()); !ok {
		t.Fatal("the held confirmation was lost")
	}
	// Emptied: the next event finds room.
	resp.NoSession(0, p.id)
	if n := resp.EventsDropped(); n != 3 {
		t.Fatalf("%d events dropped after the queue was emptied, want 3", n)
	}
}

// Tick makes its initiations (a DH each) without the core's lock, and an
// initiation whose peer got a session meanwhile (the peer's own
// initiation, answered on a shard while the message was made) is not
// sent: the session stands, nothing is left pending.
func TestTickInitiatesOutsideTheLock(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	if err := resp.SetPeers([]config.Peer{{PublicKey: ini.local.PublicKey(), Endpoint: ini.addr,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}}}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	ini.afterDH = func() {
		calls++
		if !ini.mu.TryLock() {
			t.Error("the core lock is held across the initiation's DH")
			return
		}
		ini.mu.Unlock()
		if calls > 1 {
			return
		}
		// The peer initiates too, and ini answers it on a shard.
		resp.kick(t)
		ini.deliver(resp.take(), resp.addr, ConnGroup)
	}
	ini.kick(t)
	if calls != 1 {
		t.Fatalf("afterDH ran %d times, want 1", calls)
	}
	out := ini.take()
	if len(out) != 1 || ini.hs.answered.Load() != 1 || ini.hs.initiated.Load() != 0 {
		t.Fatalf("ini sent %d datagrams, answered %d, initiated %d; want only the response",
			len(out), ini.hs.answered.Load(), ini.hs.initiated.Load())
	}
	if n := ini.npending.Load(); n != 0 {
		t.Fatalf("%d initiations pending beside the new session", n)
	}

	resp.deliver(out, ini.addr, ConnGroup)
	if resp.hs.completed.Load() != 1 || !sessionsAgree(t, ini, resp) {
		t.Fatal("the peer's handshake did not complete")
	}
}

// An initiation decided in a step but dropped before it was sent (its
// peer's session came or went meanwhile) is no attempt: it does not count
// towards the warning after unanswered ones, and the next tick may
// decide again instead of waiting out a backoff.
func TestDroppedInitiationIsNoAttempt(t *testing.T) {
	ini, _ := memPair(t, "198.51.100.7:40000")
	p := ini.peerOf(t)
	var plans []initPlan
	ini.locked(func() {
		ini.initiate(p, ini.now())
		plans, ini.outbox = ini.outbox, nil
		p.gen++ // a session came or went before the DH was made
	})
	if len(plans) != 1 {
		t.Fatalf("%d initiations decided, want 1", len(plans))
	}
	ini.sendInitiations(plans)
	ini.locked(func() {
		if p.attempts != 0 || p.nextTry.After(plans[0].at) || ini.hs.initiated.Load() != 0 {
			t.Errorf("a dropped initiation: %d attempts, next try %s after it was decided, %d sent",
				p.attempts, p.nextTry.Sub(plans[0].at), ini.hs.initiated.Load())
		}
	})
}
