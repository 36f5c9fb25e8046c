package control

import (
	"net/netip"
	"testing"
	"time"
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
