package router

// The in-memory pair (wireguard-go's genTestPair is the
// model): two routers, each a real control core and two real shard loops
// in a shard.Group, wired as New wires them (withCore, controlLoop), over
// internal/memnet's wire and TUN queues instead of sockets and a TUN
// device, so it runs in `go test` without root or namespaces. A handshake
// puts lanes on both shards of both routers; inner packets cross both
// ways intact while the wire loses 5% (FEC repairs all of it) and
// reorders 10%; one router roams to another address and the other's
// lanes follow; a rekey under traffic loses nothing; a removed peer's
// lanes go and its traffic is refused.
//
// The cores run on a clock only the test moves: the waits run their
// timers every TimerPeriod in step with real time, as the router's
// control loop does, and the rekey jumps it past RekeyAfter. The shards
// run on real time; their timers are short (FEC flushes, keepalives, loss
// reports).

import (
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/memnet"
	"github.com/yip-router/yip-router/internal/testclock"
	"github.com/yip-router/yip-router/shard"
)

// TestPair: handshake → lanes on both shards → data both ways under loss
// → roam → rekey → peer removal, two routers in memory.
func TestPair(t *testing.T) {
	p := &pair{wire: memnet.NewWire(), clock: testclock.New(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))}
	// a (the initiator: it has b's Endpoint) and b (responder only).
	p.a = newMemRouter(t, p.wire, p.clock, "a", "192.0.2.1", "10.1.0.1", 1)
	p.b = newMemRouter(t, p.wire, p.clock, "b", "198.51.100.1", "10.2.0.1", 2)
	a, b := p.a, p.b
	if err := a.core.SetPeers([]config.Peer{{PublicKey: b.key,
		Endpoint:   netip.AddrPortFrom(b.addr, pairListen),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.2.0.0/16")}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.core.SetPeers([]config.Peer{{PublicKey: a.key,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}}); err != nil {
		t.Fatal(err)
	}
	ab, ba := newFlow(a, b), newFlow(b, a)
	roamed := netip.MustParseAddr("203.0.113.7")

	// allLanes checks that each shard of r owns one lane of its peer,
	// lanes 0 and 1 between them, and that each satisfies ok; noLanes
	// that r's shards own none.
	allLanes := func(t *testing.T, r *memRouter, ok func(shard.LaneStatus) bool) bool {
		t.Helper()
		id := r.peer().ID
		var idx [pairShards]int
		for i, ls := range r.lanes(t) {
			if len(ls) != 1 || ls[0].Peer != id || ls[0].Shard != i || ls[0].Index >= pairShards || (ok != nil && !ok(ls[0])) {
				return false
			}
			idx[ls[0].Index]++
		}
		return idx == [pairShards]int{1, 1}
	}
	noLanes := func(t *testing.T, r *memRouter) bool {
		t.Helper()
		for _, ls := range r.lanes(t) {
			if len(ls) > 0 {
				return false
			}
		}
		return true
	}

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"handshake", func(t *testing.T) {
			// Traffic waits on both of a's shards; a handshake
			// follows, and the waiting packets go out once it
			// completes.
			ab.send(16)
			if !p.within(func() bool { return a.peer().Session && b.peer().Session }) {
				t.Fatalf("no session: a %+v, b %+v, wire %+v", a.peer(), b.peer(), p.wire.Stats())
			}
			if pa, pb := a.peer(), b.peer(); !pa.Initiator || pb.Initiator || pa.Handshakes != 1 {
				t.Fatalf("a %+v, b %+v: want one handshake, a initiating", pa, pb)
			}
			p.await(t, ab)
			if ep := b.peer().Endpoint; ep.Addr() != a.addr {
				t.Errorf("b has a at %v, want %v", ep, a.addr)
			}
		}},
		{"lanes on both shards", func(t *testing.T) {
			for _, r := range []*memRouter{a, b} {
				if !p.within(func() bool { return allLanes(t, r, func(l shard.LaneStatus) bool { return l.Confirmed }) }) {
					t.Errorf("%s: want one confirmed lane on each shard, lanes 0 and 1: %+v", r.name, r.lanes(t))
				}
			}
		}},
		{"data both ways under loss", func(t *testing.T) {
			// From here on the wire loses 5% and swaps 10% with the
			// next datagram of their path, and the packets are
			// bulk-sized (so FEC can recover all of the loss).
			p.wire.Lose(memnet.Spaced(pairLossLo, pairLossHi, 26))
			p.wire.Reorder(memnet.Spaced(7, 13, 27))
			ab.size, ba.size = bulkSize, bulkSize
			before := p.wire.Stats()
			ab.send(400)
			ba.send(400)
			p.await(t, ab, ba)
			st := p.wire.Stats()
			if st.Lost == before.Lost || st.Reordered == before.Reordered {
				t.Fatalf("the wire lost or reordered nothing: %+v", st)
			}
			// Every packet arrived, so FEC recovered what was lost,
			// and every lane says so.
			if !p.within(func() bool { return a.count(shard.FECRecovered) > 0 && b.count(shard.FECRecovered) > 0 }) {
				t.Errorf("wire lost %d, FEC recovered %d at a and %d at b", st.Lost-before.Lost,
					a.count(shard.FECRecovered), b.count(shard.FECRecovered))
			}
			carried := func(l shard.LaneStatus) bool {
				return l.RxPackets > 0 && l.TxPackets > 0 && l.Recovered > 0 && l.Unrecov == 0
			}
			for _, r := range []*memRouter{a, b} {
				if !allLanes(t, r, carried) {
					t.Errorf("%s: want traffic both ways on every lane, losses recovered and none unrecovered: %+v", r.name, r.lanes(t))
				}
			}
		}},
		{"roam", func(t *testing.T) {
			// a moves to a new address: its datagrams come from there,
			// and what b still sends to the old one is lost.
			p.wire.Move(a.addr, roamed)
			ab.send(100)
			p.await(t, ab)
			followed := func(l shard.LaneStatus) bool { return l.Remote.Addr() == roamed }
			if !p.within(func() bool { return allLanes(t, b, followed) && b.peer().Endpoint.Addr() == roamed }) {
				t.Fatalf("b's lanes and endpoint did not follow a to %v: endpoint %v, lanes %+v", roamed, b.peer().Endpoint, b.lanes(t))
			}
			ba.send(100)
			ab.send(100)
			p.await(t, ab, ba)
		}},
		{"rekey", func(t *testing.T) {
			ab.send(40)
			ba.send(40)
			// Past the rekey time and its jitter (up to a tenth): a,
			// the initiator, rekeys at its next tick.
			p.tick(pairRekey + pairRekey/10 + time.Second)
			if !p.within(func() bool {
				ab.send(4) // traffic all through the rekey
				ba.send(4)
				ab.take(t)
				ba.take(t)
				// b answers each initiation it gets: a lost response
				// and a retry make it count two.
				return a.peer().Handshakes >= 2 && b.peer().Handshakes >= 2
			}) {
				t.Fatalf("no rekey: a %+v, b %+v", a.peer(), b.peer())
			}
			if !a.peer().Initiator || b.peer().Initiator {
				t.Errorf("the rekey changed sides: a %+v, b %+v", a.peer(), b.peer())
			}
			ab.send(40)
			ba.send(40)
			p.await(t, ab, ba)
			// New keys on every lane, the previous ones kept for what is
			// in flight, and b still at a's new address.
			rekeyed := func(l shard.LaneStatus) bool { return l.Confirmed && l.PrevKeys }
			if !p.within(func() bool { return allLanes(t, a, rekeyed) && allLanes(t, b, rekeyed) }) {
				t.Errorf("want every lane confirmed under new keys, previous ones kept: a %+v, b %+v", a.lanes(t), b.lanes(t))
			}
			if !allLanes(t, b, func(l shard.LaneStatus) bool { return l.Remote.Addr() == roamed }) {
				t.Errorf("b's lanes left a's address %v at the rekey: %+v", roamed, b.lanes(t))
			}
		}},
		{"peer removed", func(t *testing.T) {
			// b's reload drops a: its lanes go on both shards, and
			// traffic between them is refused both ways.
			if err := b.core.SetPeers(nil); err != nil {
				t.Fatal(err)
			}
			if !p.within(func() bool { return noLanes(t, b) }) {
				t.Fatalf("b's lanes outlived its peer: %+v", b.lanes(t))
			}
			gotAB, gotBA := ab.got, ba.got
			unknown, noRoute := b.count(shard.DropUnknownLane), b.count(shard.DropNoRoute)
			ab.send(40) // on a's lanes, which b no longer has
			ba.send(40) // b has no route to a
			if !p.within(func() bool {
				return b.count(shard.DropUnknownLane) >= unknown+20 && b.count(shard.DropNoRoute) == noRoute+40
			}) {
				t.Fatalf("b did not refuse a's traffic: drop_unknown_lane %d → %d, drop_no_route %d → %d",
					unknown, b.count(shard.DropUnknownLane), noRoute, b.count(shard.DropNoRoute))
			}
			ab.take(t)
			ba.take(t)
			if ab.got != gotAB || ba.got != gotBA {
				t.Errorf("traffic crossed after the peer was removed: %d a→b, %d b→a", ab.got-gotAB, ba.got-gotBA)
			}
			if len(b.core.Peers()) != 0 {
				t.Errorf("b still has peers: %+v", b.core.Peers())
			}
			// And a's reload drops b: a's lanes go too.
			if err := a.core.SetPeers(nil); err != nil {
				t.Fatal(err)
			}
			if !p.within(func() bool { return noLanes(t, a) }) {
				t.Errorf("a's lanes outlived its peer: %+v", a.lanes(t))
			}
		}},
	}
	start := time.Now()
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
	t.Logf("%d packets a→b, %d b→a; wire %+v; %v", ab.got, ba.got, p.wire.Stats(), time.Since(start).Round(time.Millisecond))
}
