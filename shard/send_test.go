package shard

// Sending's refusals and bounds: a local address the host lost, an inner
// packet too long for a datagram, the wait queue's bound per shard and a
// removed peer's waiting packets, keepalives only on owned lanes, and a
// dry pool.

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net/netip"
	"testing"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/ring"
)

// installTo installs lane 0 of 1 for peer at remote, sending from local,
// with fresh keys.
func installTo(t *testing.T, s *Shard, peer PeerID, remote netip.AddrPort, local netip.Addr) {
	t.Helper()
	var k1, k2 [32]byte
	rand.Read(k1[:])
	rand.Read(k2[:])
	keys := crypto.NewSessionKeys(k1, k2, true)
	if err := s.InstallLane(LaneConfig{Peer: peer, Index: 0, Lanes: 1, Remote: remote, Local: local, Conn: 0,
		Send: keys.SendLane(0), Recv: keys.RecvLane(0), FEC: fec.EncoderConfig{K: 8, R: 0}}); err != nil {
		t.Fatal(err)
	}
}

// When the socket says the host no longer has a local address a lane
// sends from (udp.Batch.LocalGone), that lane sends from the routing
// table's choice from then on; a lane sending from another address keeps
// it.
func TestLostLocalAddressForgotten(t *testing.T) {
	sd := newSide(t, 1, []Route{{netip.MustParsePrefix("10.2.0.0/16"), 2}, {netip.MustParsePrefix("10.3.0.0/16"), 3}})
	s := sd.shards[0]
	sock := &stubSocket{}
	s.cfg.Conns = []Socket{sock}
	s.sendHook = nil
	lost, kept := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")
	to2, to3 := addrB, netip.MustParseAddrPort("192.0.2.3:51820")
	installTo(t, s, 2, to2, lost)
	installTo(t, s, 3, to3, kept)
	send := func() map[netip.AddrPort]netip.Addr {
		sock.sent = nil
		inject(t, s, ipPacket("10.1.0.5", "10.2.0.9", 100, 0))
		inject(t, s, ipPacket("10.1.0.5", "10.3.0.9", 100, 0))
		s.flushAll()
		from := map[netip.AddrPort]netip.Addr{}
		for _, d := range sock.sent {
			from[d.to] = d.local
		}
		return from
	}
	sock.gone = lost
	if from := send(); from[to2] != lost || from[to3] != kept {
		t.Fatalf("first batch sent from %v", from)
	}
	sock.gone = netip.Addr{}
	if from := send(); from[to2].IsValid() || from[to3] != kept {
		t.Fatalf("after %v was gone: sent to %v from %v, to %v from %v; want the routing table's choice and %v",
			lost, to2, from[to2], to3, from[to3], kept)
	}
	for _, st := range s.LaneStatuses() {
		if want := map[PeerID]netip.Addr{2: {}, 3: kept}[st.Peer]; st.Local != want {
			t.Errorf("peer %d's lane shows local %v, want %v", st.Peer, st.Local, want)
		}
	}
	s.publish()
	if sn := s.Snapshot(); sn.Get(UDPOut) != 4 || sn.Get(DropSend) != 0 {
		t.Fatalf("udp_out %d drop_send %d; the socket took all 4", sn.Get(UDPOut), sn.Get(DropSend))
	}
}

// An inner packet longer than a datagram carries (MTU misconfigured) is
// dropped and counted before any sealing, its buffer back in the pool; one
// of exactly MaxInner bytes crosses intact.
func TestOversizeInnerPacketDropped(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 2})
	sa := a.shards[0]
	inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", MaxInner+1, 1))
	sa.flushAll()
	sa.publish()
	if sn := sa.Snapshot(); sn.Get(DropOversize) != 1 || len(a.sent[0]) != 0 {
		t.Fatalf("drop_oversize %d, %d datagrams sent", sn.Get(DropOversize), len(a.sent[0]))
	}
	if sa.pool.Free() != sa.pool.Cap() {
		t.Fatalf("%d of %d buffers free after the drop", sa.pool.Free(), sa.pool.Cap())
	}
	pkt := ipPacket("10.1.0.5", "10.2.0.9", MaxInner, 2)
	inject(t, sa, pkt)
	deliverAll(t, a, b, nil)
	if len(b.tun[0]) != 1 || !bytes.Equal(b.tun[0][0], pkt) {
		t.Fatalf("a %d-byte packet: %d delivered", MaxInner, len(b.tun[0]))
	}
}

// The wait queue holds at most waitPerShard packets over all peers, so
// handshakes to many peers cannot drain the pool: past that, new packets
// are dropped and counted, and every buffer is either waiting or free.
func TestWaitBoundedPerShard(t *testing.T) {
	const peers = waitPerShard/waitPerPeer + 1
	var routes []Route
	for i := range peers {
		routes = append(routes, Route{netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", 100+i)), PeerID(100 + i)})
	}
	sd := newSidePool(t, 1, routes, 2*waitPerShard)
	s := sd.shards[0]
	for i := range peers {
		for j := range waitPerPeer {
			inject(t, s, ipPacket("10.1.0.5", fmt.Sprintf("10.%d.0.9", 100+i), 60, j))
		}
	}
	s.publish()
	sn := s.Snapshot()
	dropped := sn.Get(DropNoSession)
	if s.waitTotal != waitPerShard || dropped != peers*waitPerPeer-waitPerShard {
		t.Fatalf("%d packets wait, %d dropped; want %d and %d", s.waitTotal, dropped, waitPerShard, peers*waitPerPeer-waitPerShard)
	}
	if held := s.pool.Cap() - s.pool.Free(); held != waitPerShard {
		t.Fatalf("%d buffers out of the pool for %d waiting packets", held, waitPerShard)
	}
	if q := s.waiting[PeerID(100+peers-1)]; q != nil && len(q.pkts) != 0 {
		t.Fatalf("the last peer has %d packets waiting past the shard's bound", len(q.pkts))
	}
}

// A removed peer's waiting packets are dropped and counted, their buffers
// back in the pool: a later session with the same id does not send them.
func TestRemovePeerDropsWaiting(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	sa := a.shards[0]
	for i := range 3 {
		inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 60, i))
	}
	sa.RemovePeer(2)
	sa.publish()
	if sn := sa.Snapshot(); sn.Get(DropNoSession) != 3 || sa.waitTotal != 0 || sa.pool.Free() != sa.pool.Cap() {
		t.Fatalf("drop_no_session %d, %d waiting, %d of %d buffers free", sn.Get(DropNoSession), sa.waitTotal, sa.pool.Free(), sa.pool.Cap())
	}
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 0})
	if n := deliverAll(t, a, b, nil); n != 0 || len(b.tun[0]) != 0 {
		t.Fatalf("the removed peer's packets went out with its next session: %d datagrams, %d delivered", n, len(b.tun[0]))
	}
}

// SendKeepalive sends only on a lane this shard owns, and a control frame
// that finds the pool dry is not sent and is counted.
func TestSendKeepaliveOwnedLanesOnly(t *testing.T) {
	a, b := newSide(t, 2, routesA), newSide(t, 2, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 0})
	s0 := a.shards[0]
	for _, c := range []struct {
		peer  PeerID
		index int
	}{{2, 1}, {2, 2}, {9, 0}} { // another shard's lane, no such lane, no such peer
		if s0.SendKeepalive(c.peer, c.index) {
			t.Errorf("keepalive sent on lane %d of peer %d, which shard 0 does not own", c.index, c.peer)
		}
	}
	if !s0.SendKeepalive(2, 0) {
		t.Fatal("no keepalive on shard 0's own lane")
	}
	deliverAll(t, a, b, nil)
	b.shards[0].publish()
	if sn := b.shards[0].Snapshot(); sn.Get(ControlIn) != 1 {
		t.Fatalf("B took %d control frames, want the keepalive", sn.Get(ControlIn))
	}
	var held []*ring.Packet
	for p := s0.pool.Get(); p != nil; p = s0.pool.Get() {
		held = append(held, p)
	}
	if s0.SendKeepalive(2, 0) {
		t.Fatal("keepalive sent with no buffer")
	}
	for _, p := range held {
		s0.pool.Put(p)
	}
	s0.publish()
	if sn := s0.Snapshot(); sn.Get(DropPoolEmpty) != 1 {
		t.Fatalf("drop_pool_empty %d, want 1", sn.Get(DropPoolEmpty))
	}
}

// A datagram for another shard's lane that finds the receiving shard's
// pool dry is dropped and counted there, not handed over half-made; with
// buffers back the next one is handed over and delivered.
func TestHandOverWithDryPool(t *testing.T) {
	a, b := newSide(t, 2, routesA), newSide(t, 2, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 0})
	inject(t, a.shards[1], ipPacket("10.1.0.5", "10.2.0.9", 60, 1)) // lane 1
	a.shards[1].flushAll()
	d := a.sent[1][0].data
	from := netip.AddrPortFrom(addrA.Addr(), addrA.Port()+1) // lane 1's address
	b0, b1 := b.shards[0], b.shards[1]
	var held []*ring.Packet
	for p := b0.pool.Get(); p != nil; p = b0.pool.Get() {
		held = append(held, p)
	}
	b0.ingress(0, bytes.Clone(d), from) // arrived on the wrong shard
	b0.publish()
	if sn := b0.Snapshot(); sn.Get(DropPoolEmpty) != 1 || sn.Get(ForeignLane) != 0 {
		t.Fatalf("dry pool: drop_pool_empty %d foreign_lane %d", sn.Get(DropPoolEmpty), sn.Get(ForeignLane))
	}
	for _, p := range held {
		b0.pool.Put(p)
	}
	b0.ingress(0, bytes.Clone(d), from) // the same datagram again, as if retransmitted
	b0.flushAll()
	b1.takeMesh()
	if len(b.tun[1]) != 1 || len(b.tun[0]) != 0 {
		t.Fatalf("after the hand-over: shard 1 wrote %d packets, shard 0 %d; want 1 and 0", len(b.tun[1]), len(b.tun[0]))
	}
}
