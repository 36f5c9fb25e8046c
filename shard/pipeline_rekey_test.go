package shard

// Tests of the pipeline across key changes: rekeys lose no packet, the
// responder holds the keys the initiator has confirmed, and the decoders'
// counters survive their lanes being replaced or removed.

import (
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// A rekey loses nothing: packets sealed under the old keys still open after
// the new keys are installed, and the responder keeps sending under the old
// keys until the initiator has shown it holds the new ones.
func TestPipelineRekey(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 1})
	sa, sb := a.shards[0], b.shards[0]
	for i := range 6 {
		inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 100, i)) // old keys, in flight
	}
	sa.flushAll()
	inFlight := a.sent[0]
	a.sent[0] = nil
	connectHold(t, a, b, fec.EncoderConfig{K: 4, R: 1}, true) // rekey
	// B answers with the old keys: A must still open them.
	inject(t, sb, ipPacket("10.2.0.9", "10.1.0.5", 80, 100))
	deliverAll(t, b, a, nil)
	if len(a.tun[0]) != 1 {
		t.Fatalf("A got %d packets from B before B confirmed the new keys", len(a.tun[0]))
	}
	// The old in-flight packets arrive late, then new-key packets.
	a.sent[0] = inFlight
	for i := 6; i < 10; i++ {
		inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 100, i))
	}
	deliverAll(t, a, b, nil)
	if len(b.tun[0]) != 10 {
		t.Fatalf("B delivered %d of 10 across the rekey", len(b.tun[0]))
	}
	// B now sends with the new keys; A's current keys open them.
	inject(t, sb, ipPacket("10.2.0.9", "10.1.0.5", 80, 101))
	sb.flushAll()
	d := b.sent[0][0].data
	if _, _, err := sa.table.lanes[addrB].cur.rxf.Deframe(append([]byte(nil), d...)); err != nil {
		t.Fatalf("B still sends under the old keys after confirmation: %v", err)
	}
	deliverAll(t, b, a, nil)
	if len(a.tun[0]) != 2 {
		t.Fatalf("A got %d of 2", len(a.tun[0]))
	}
}

// Two rekeys answered in a row with HoldTx, the first response lost: the
// initiator still has the first keys, so the responder must keep them as
// prev (not the never-used middle keys) and keep sending under them.
func TestPipelineDoubleHoldKeepsConfirmedKeys(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 1})
	sb := b.shards[0]
	first := sb.table.lanes[addrA].cfg
	for i := range 2 {
		cfg := first
		ks := crypto.NewSessionKeys([32]byte{byte(i + 1)}, [32]byte{byte(i + 50)}, false)
		cfg.Send, cfg.Recv = ks.SendLane(0), ks.RecvLane(0)
		cfg.HoldTx = true
		if err := sb.InstallLane(cfg); err != nil {
			t.Fatal(err)
		}
	}
	// A, still on the first keys, sends; B must open it.
	inject(t, a.shards[0], ipPacket("10.1.0.5", "10.2.0.9", 80, 7))
	deliverAll(t, a, b, nil)
	if len(b.tun[0]) != 1 {
		t.Fatalf("B dropped a packet under the keys the initiator still holds")
	}
	// B answers under the first keys too, which A opens; the partial FEC
	// group it opened under those keys still gets its parity on time.
	inject(t, sb, ipPacket("10.2.0.9", "10.1.0.5", 80, 8))
	sb.now = sb.now.Add(fec.DefaultFlushTimeout + time.Millisecond)
	sb.tick()
	sb.publish()
	if sn := sb.Snapshot(); sn.Get(ParityOut) != 1 {
		t.Fatalf("parity of the partial group under the previous keys: %d sent, want 1", sn.Get(ParityOut))
	}
	deliverAll(t, b, a, nil)
	if len(a.tun[0]) != 1 {
		t.Fatalf("A could not open B's reply: B sent under keys A never got")
	}
}

// The FEC counters a shard publishes (fec_recovered, drop_duplicate,
// drop_fec_window) come from its lanes' decoders, which a rekey replaces
// and a removal drops. Published counters must never decrease (Prometheus
// counters), nor count anything twice: across two rekeys, the end of the
// previous keys, a change of lane count and the removal of the peer they
// stay exactly what the decoders counted.
func TestDecoderCountersSurviveLaneReplacement(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	sa, sb := a.shards[0], b.shards[0]
	fc := fec.EncoderConfig{K: 4, R: 1}
	var last Snapshot
	check := func(what string, rec, dup, win uint64) {
		t.Helper()
		sb.publish()
		sn := sb.Snapshot()
		for _, c := range Counters() {
			if !c.IsGauge() && sn.Get(c) < last.Get(c) {
				t.Errorf("%s: %s went down from %d to %d", what, c, last.Get(c), sn.Get(c))
			}
		}
		if sn.Get(FECRecovered) != rec || sn.Get(DropDuplicate) != dup || sn.Get(DropFECWindow) != win {
			t.Errorf("%s: fec_recovered %d drop_duplicate %d drop_fec_window %d, want %d %d %d", what,
				sn.Get(FECRecovered), sn.Get(DropDuplicate), sn.Get(DropFECWindow), rec, dup, win)
		}
		last = sn
	}
	feed := func(d wireDgram) {
		p := sb.pool.Get()
		p.N, p.Addr = copy(p.Buf, d.data), addrA
		sb.ingress(0, p.Buf[:p.N], p.Addr)
		sb.pool.Put(p)
	}
	// traffic sends 40 packets A → B losing one datagram of each group of
	// 5: the decoder recovers 10. The first datagram is fed once more at
	// once (a duplicate) and, with dupLate, again after 60 more groups (late:
	// behind the 32-group window).
	traffic := func(dupLate bool) {
		t.Helper()
		for i := range 40 {
			inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 100, i))
		}
		sa.flushAll()
		first := a.sent[0][0]
		deliverAll(t, a, b, func(k int) bool { return k%5 == 2 })
		feed(first)
		if dupLate {
			for i := range 240 {
				inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 100, i))
			}
			deliverAll(t, a, b, nil)
			feed(first)
		}
	}
	connect(t, a, b, fc)
	traffic(true)
	check("first keys", 10, 1, 1)
	connectHold(t, a, b, fc, true) // rekey: the first keys become prev
	check("after a rekey", 10, 1, 1)
	traffic(false) // under the second keys, which B now confirms
	check("traffic on the second keys", 20, 2, 1)
	connectHold(t, a, b, fc, true) // the first keys go, the second become prev
	check("after a second rekey", 20, 2, 1)
	traffic(false)
	sb.now = sb.now.Add(prevKeep + time.Second)
	sb.tick() // the second keys go
	check("after the previous keys expired", 30, 3, 1)
	// The peer comes back with two lanes: its one-lane entry goes.
	ln := sb.table.lanes[addrA]
	cfg := ln.cfg
	cfg.Lanes = 2
	if err := sb.InstallLane(cfg); err != nil {
		t.Fatal(err)
	}
	check("after the lane count changed", 30, 3, 1)
	sb.RemovePeer(1)
	check("after the peer was removed", 30, 3, 1)
}

// A responder whose new keys the initiator never got (the response was
// lost) receives under its previous keys: its loss reports count what
// that decoder counted, or the initiator's adapter hears of nothing.
func TestLossReportCountsPreviousKeys(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 1})
	sb := b.shards[0]
	cfg := sb.table.lanes[addrA].cfg
	ks := crypto.NewSessionKeys([32]byte{1}, [32]byte{50}, false)
	cfg.Send, cfg.Recv, cfg.HoldTx = ks.SendLane(0), ks.RecvLane(0), true
	if err := sb.InstallLane(cfg); err != nil {
		t.Fatal(err)
	}
	lb := sb.table.lanes[addrA]
	lb.takeLossReport() // what came before the rekey
	for i := range 8 {
		inject(t, a.shards[0], ipPacket("10.1.0.5", "10.2.0.9", 80, 10+i))
	}
	deliverAll(t, a, b, nil)
	if len(b.tun[0]) != 8 || lb.cur.confirmed {
		t.Fatalf("B delivered %d of 8 packets under its previous keys (new keys confirmed: %v)", len(b.tun[0]), lb.cur.confirmed)
	}
	for _, ks := range lb.keysets() {
		ks.dec.Tick(sb.now.Add(10 * time.Second)) // the groups' accounting, without a report
	}
	if n := lb.counted(); n < 8 {
		t.Fatalf("counted toward the next report: %d symbols, want the 8 data and their parity", n)
	}
	if rep := lb.takeLossReport(); rep.Expected < 8 || rep.Received != rep.Expected {
		t.Fatalf("loss report under the previous keys: %+v, want the 8 data and their parity, none lost", rep)
	}
}
