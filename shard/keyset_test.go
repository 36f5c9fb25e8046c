package shard

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard/udp"
)

// A rekey gives a lane new keys and keeps the lane: the table and what the
// lane learnt see the same lane, the keys it replaced stay as its previous
// ones until the new ones are confirmed and prevKeep old, the hello
// exchange starts over, and the address the lane holds is never let go
// meanwhile (no moment unsteered).
func TestRekeyKeepsLane(t *testing.T) {
	fs := &fakeSteer{}
	a, b, sb := steeredSides(t, 1, fs, true)
	for i := range 3 {
		inject(t, a.shards[0], ipPacket("10.1.0.5", "10.2.0.9", 200, i))
	}
	deliverAll(t, a, b, nil)
	ln := sb.ownedLane(1, 0)
	first, slot, rx := ln.cur, ln.slot, ln.rxPackets
	if rx != 3 {
		t.Fatalf("%d packets received, want 3", rx)
	}
	ln.peerFeatures, ln.heardPeer = Features, true
	unsteers := fs.unsteers
	connectHold(t, a, b, fec.EncoderConfig{K: 4, R: 0}, true)
	if sb.ownedLane(1, 0) != ln || sb.table.laneAt(addrA) != ln || ln.slot != slot {
		t.Fatal("the rekey replaced the lane")
	}
	if ln.cur == first || ln.prev != first || ln.cur.confirmed {
		t.Fatalf("after the rekey: new keys %v, previous keys the first %v, confirmed %v", ln.cur != first, ln.prev == first, ln.cur.confirmed)
	}
	if ln.rxPackets != rx || ln.peerFeatures != Features&^FeatureLongGroups || ln.heardPeer {
		t.Fatalf("after the rekey: %d received (want %d), features %#x (want them kept but long groups), hello heard %v (want it asked again)", ln.rxPackets, rx, ln.peerFeatures, ln.heardPeer)
	}
	if c, ok := fs.at[addrA]; !ok || c != sb.cfg.Conns[0] || fs.unsteers != unsteers || !ln.steered {
		t.Fatalf("the rekey let go of the lane's steering entry (%d unsteers)", fs.unsteers-unsteers)
	}
	inject(t, a.shards[0], ipPacket("10.1.0.5", "10.2.0.9", 200, 10)) // under the new keys
	deliverAll(t, a, b, nil)
	if !ln.cur.confirmed || ln.rxPackets != rx+1 {
		t.Fatalf("new keys confirmed %v, %d received", ln.cur.confirmed, ln.rxPackets)
	}
	sb.now = sb.now.Add(prevKeep + time.Second)
	sb.tick()
	if ln.prev != nil {
		t.Fatal("previous keys kept past prevKeep")
	}
}

// A rekey that puts a lane on another of the shard's sockets (this time
// the peer initiated, and a responder's lane answers from the group
// socket) moves its steering entry there, and what the lane still sends
// under its previous keys leaves from there too: the keys change, the
// path is the lane's.
func TestRekeyMovesLaneSocket(t *testing.T) {
	a := newSide(t, 1, routesA)
	b := newSideConns(t, 1, routesB, 1024, func(int) []*udp.Conn { return []*udp.Conn{new(udp.Conn), new(udp.Conn)} })
	checkAtEnd(t, a, b)
	fs := &fakeSteer{at: map[netip.AddrPort]*udp.Conn{}}
	sb := b.shards[0]
	sb.cfg.Steer = fs
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	cfg := sb.ownedLane(1, 0).cfg
	keys := crypto.NewSessionKeys([32]byte{3}, [32]byte{4}, false)
	cfg.Conn, cfg.HoldTx, cfg.Send, cfg.Recv = 1, true, keys.SendLane(0), keys.RecvLane(0)
	if err := sb.InstallLane(cfg); err != nil {
		t.Fatal(err)
	}
	ln := sb.ownedLane(1, 0)
	if c := fs.at[addrA]; c != sb.cfg.Conns[1] || !ln.steered || sb.table.laneAt(addrA) != ln {
		t.Fatalf("after the rekey the map sends the lane's remote to socket %p (steered %v), want the lane's new socket %p", c, ln.steered, sb.cfg.Conns[1])
	}
	var sent []int
	var d []byte
	sb.sendHook = func(c int, bt *udp.Batch, k int) {
		for j := range k {
			sent = append(sent, c)
			d = bytes.Clone(bt.Bufs[j][:bt.Sizes[j]])
		}
	}
	inject(t, sb, ipPacket("10.2.0.9", "10.1.0.5", 200, 1))
	sb.flushAll()
	if len(sent) != 1 || sent[0] != 1 {
		t.Fatalf("sent on sockets %v, want the lane's socket 1", sent)
	}
	if _, _, err := a.shards[0].table.lanes[addrB].cur.rxf.Deframe(d); err != nil {
		t.Fatalf("not sent under the keys the peer holds (the previous ones): %v", err)
	}
}
