package shard

// Tests of one packet's path through a pair of shards: egress, the wire and
// ingress, with loss and FEC recovery, hand-over between shards, packets
// waiting for a session, zero allocation, and what the counters say.

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard/udp"
)

func TestPipelineRoundTrip(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 1})
	var want [][]byte
	for i, n := range []int{20, 64, 512, 1400, 1500} {
		for _, pair := range [][2]string{{"10.1.0.5", "10.2.0.9"}, {"fd00:1::5", "fd00:2::9"}} {
			pkt := ipPacket(pair[0], pair[1], n, i)
			want = append(want, pkt)
			inject(t, a.shards[0], pkt)
		}
	}
	deliverAll(t, a, b, nil)
	if len(b.tun[0]) != len(want) {
		t.Fatalf("delivered %d of %d packets", len(b.tun[0]), len(want))
	}
	for i := range want {
		if !bytes.Equal(b.tun[0][i], want[i]) {
			t.Fatalf("packet %d differs", i)
		}
	}
	sa, sb := a.shards[0], b.shards[0]
	sa.publish()
	sb.publish()
	snA, snB := sa.Snapshot(), sb.Snapshot()
	if snA.Get(TunIn) != uint64(len(want)) || snA.Get(ParityOut) != uint64(len(want)/4) || snB.Get(TunOut) != uint64(len(want)) {
		t.Fatalf("counters: A %v B %v", snA, snB)
	}
	// Small packets stay small: a 20-byte packet costs 20+40 bytes.
	inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 20, 0))
	sa.flushAll()
	if n := len(a.sent[0][0].data); n != 20+crypto.DataOverhead {
		t.Fatalf("20-byte packet became a %d-byte datagram", n)
	}
}

func TestPipelineDropsAndRecovery(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 1})
	sa, sb := a.shards[0], b.shards[0]
	// Lose the second datagram of every group of 5 (4 data + 1 parity):
	// FEC must recover all of them.
	for i := range 40 {
		inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 100+i, i))
	}
	deliverAll(t, a, b, func(k int) bool { return k%5 == 2 })
	sb.publish()
	sn := sb.Snapshot()
	if len(b.tun[0]) != 40 || sn.Get(FECRecovered) != 10 {
		t.Fatalf("delivered %d of 40, recovered %d", len(b.tun[0]), sn.Get(FECRecovered))
	}
	seen := map[uint32]bool{}
	for _, p := range b.tun[0] {
		seen[binary.BigEndian.Uint32(p[20:])] = true
	}
	if len(seen) != 40 {
		t.Fatalf("%d distinct packets delivered", len(seen))
	}
	// Replays, forged datagrams, spoofed inner sources, unknown routes.
	inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 100, 99))
	sa.flushAll()
	d := a.sent[0][0]
	for i := range 3 {
		if i == 2 {
			// Long after the group expired: still refused (by the FEC
			// window or, if it resynchronised, the replay window).
			sb.now = sb.now.Add(time.Second)
			sb.tick()
		}
		p := sb.pool.Get()
		p.N, p.Addr = copy(p.Buf, d.data), addrA
		sb.ingress(0, p.Buf[:p.N], p.Addr)
		sb.pool.Put(p)
	}
	p := sb.pool.Get()
	p.N, p.Addr = copy(p.Buf, d.data), addrA
	p.Buf[p.N-1] ^= 1
	sb.ingress(0, p.Buf[:p.N], p.Addr)
	p.Addr = netip.MustParseAddrPort("198.51.100.7:1")
	sb.ingress(0, p.Buf[:p.N], p.Addr)
	sb.pool.Put(p)
	a.sent[0] = nil
	inject(t, sa, ipPacket("10.9.0.5", "10.2.0.9", 60, 0)) // source not A's
	inject(t, sa, ipPacket("10.1.0.5", "10.7.0.9", 60, 0)) // no route
	deliverAll(t, a, b, nil)
	sa.publish()
	sb.publish()
	snA, snB := sa.Snapshot(), sb.Snapshot()
	if got := snB.Get(DropReplay) + snB.Get(DropDuplicate) + snB.Get(DropFECWindow); got != 2 {
		t.Errorf("two replays of a delivered datagram: %d refused", got)
	}
	if snB.Get(TunOut) != 41 {
		t.Errorf("tun_out %d, want 41", snB.Get(TunOut))
	}
	for c, want := range map[Counter]uint64{DropBadTag: 1, DropUnknownLane: 1, DropNotAllowed: 1} {
		if snB.Get(c) != want {
			t.Errorf("B %s = %d, want %d", c, snB.Get(c), want)
		}
	}
	if snA.Get(DropNoRoute) != 1 {
		t.Errorf("A drop_no_route = %d", snA.Get(DropNoRoute))
	}
}

// With 2 shards on A and 1 on B the session has one lane, owned by A's
// shard 0: a packet read on A's shard 1 travels to shard 0 through the mesh,
// and its buffer comes home afterwards.
func TestPipelineHandoff(t *testing.T) {
	a, b := newSide(t, 2, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 0})
	a1, a0 := a.shards[1], a.shards[0]
	free := a1.pool.Free()
	for i := range 10 {
		inject(t, a1, ipPacket("10.1.0.5", "10.2.0.9", 80, i))
	}
	a1.flushAll()
	if a1.pool.Free() != free-10 {
		t.Fatalf("shard 1 lent %d buffers, want 10", free-a1.pool.Free())
	}
	if n := a0.takeMesh(); n != 10 {
		t.Fatalf("shard 0 took %d packets", n)
	}
	a0.flushAll()
	a1.takeMesh()
	if a1.pool.Free() != free {
		t.Fatalf("shard 1 got back %d of 10 buffers", a1.pool.Free()-(free-10))
	}
	deliverAll(t, a, b, nil)
	if len(b.tun[0]) != 10 {
		t.Fatalf("delivered %d of 10", len(b.tun[0]))
	}
	a0.publish()
	a1.publish()
	if s0, s1 := a0.Snapshot(), a1.Snapshot(); s1.Get(HandedOff) != 10 || s0.Get(TakenOver) != 10 || s0.Get(UDPOut) != 10 || s1.Get(UDPOut) != 0 {
		t.Fatalf("counters: shard0 %v shard1 %v", s0, s1)
	}
}

// The steady-state per-packet path allocates nothing: a batch through
// egress (route, seal, FEC, frame, pad, stage) and ingress (lane lookup,
// tag, unmask, FEC, open, source check, TCP timestamps noted while parity
// arrives, TUN write), in every padding mode, for UDP and TCP packets.
func TestPipelineZeroAlloc(t *testing.T) {
	pkts := map[string][]byte{
		"udp": ipPacket("10.1.0.5", "10.2.0.9", 1400, 1),
		"tcp": tcpSegment(1, 1000, 1400-20-32),
	}
	for _, mode := range []PadMode{PadOff, PadLight, PadFull} {
		for kind, pkt := range pkts {
			testPipelineZeroAlloc(t, mode, kind, pkt)
		}
	}
}

func testPipelineZeroAlloc(t *testing.T, mode PadMode, kind string, pkt []byte) {
	t.Run(mode.String()+"/"+kind, func(t *testing.T) {
		a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
		connect(t, a, b, fec.EncoderConfig{K: 8, R: 2})
		sa, sb := a.shards[0], b.shards[0]
		sa.cfg.Padding = Padding{Mode: mode, MaxWire: 1500}
		sa.table.lanes[addrB].peerFeatures, sa.table.lanes[addrB].heardPeer = Features, true
		const batch = 32
		rl := newRelay(sa, 2*batch)
		delivered := 0
		sb.tunOut = func([]byte) error { delivered++; return nil }
		round := func() {
			for range batch {
				p := sa.pool.Get()
				p.N = copy(p.Buf[headroom:], pkt)
				sa.egress(p)
			}
			sa.flushAll()
			rl.deliver(sb)
		}
		round() // warm up
		allocs := testing.AllocsPerRun(50, round)
		if allocs != 0 {
			t.Fatalf("%.1f allocations per batch of %d", allocs, batch)
		}
		if delivered != 51*batch+batch {
			t.Fatalf("delivered %d packets", delivered)
		}
	})
}

// Packets for a peer without lanes wait (bounded) and go out once the
// lanes exist; the router is asked once for a handshake.
func TestPipelineWaitsForSession(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	asked := 0
	a.shards[0].cfg.NoSession = func(_ int, peer PeerID) {
		if peer == 2 {
			asked++
		}
	}
	for i := range waitPerPeer + 5 {
		inject(t, a.shards[0], ipPacket("10.1.0.5", "10.2.0.9", 60, i))
	}
	if asked != 1 {
		t.Fatalf("asked for a handshake %d times", asked)
	}
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 1})
	deliverAll(t, a, b, nil)
	if len(b.tun[0]) != waitPerPeer {
		t.Fatalf("delivered %d waiting packets, want the newest %d", len(b.tun[0]), waitPerPeer)
	}
	if seq := binary.BigEndian.Uint32(b.tun[0][0][20:]); seq != 5 {
		t.Fatalf("oldest delivered is %d, want 5 (oldest dropped first)", seq)
	}
	// Old waiting packets expire.
	for i := range 3 {
		inject(t, a.shards[0], ipPacket("10.1.0.5", "10.99.0.9", 60, i)) // no route
	}
	a.table.Store(NewTable(append(routesA, Route{netip.MustParsePrefix("10.99.0.0/16"), 9})))
	inject(t, a.shards[0], ipPacket("10.1.0.5", "10.99.0.9", 60, 0))
	a.shards[0].now = a.shards[0].now.Add(waitMaxAge + time.Second)
	a.shards[0].tick()
	a.shards[0].publish()
	if sn := a.shards[0].Snapshot(); sn.Get(DropNoSession) != 5+1 {
		t.Fatalf("drop_no_session %d, want 6", sn.Get(DropNoSession))
	}
}

// A shard told about another shard's lane before its own lane's install
// arrives must not hand its waiting packets to itself (there is no ring from
// a shard to itself): they keep waiting for the install.
func TestPipelineOwnInstallArrivesLast(t *testing.T) {
	a, b := newSide(t, 2, routesA), newSide(t, 2, routesB)
	a1 := a.shards[1]
	inject(t, a1, ipPacket("10.1.0.5", "10.2.0.9", 60, 1)) // waits: no lanes yet
	a1.SetLaneOwner(2, 2, 0, 0, addrB, nil)                // lane 0 is shard 0's
	a1.flushAll()                                          // used to panic on a nil ring
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 1})        // now lane 1 arrives
	deliverAll(t, a, b, nil)
	if len(b.tun[1]) != 1 {
		t.Fatalf("the waiting packet was not sent once its lane arrived (%d delivered)", len(b.tun[1]))
	}
}

// A datagram the kernel refuses is counted as drop_send, even in the middle
// of a batch, and udp_out and bytes_out count exactly what was sent: here
// one peer's lane points at port 0 (EINVAL) and its datagrams are mixed
// into the batch with another peer's, sent on a real loopback socket.
func TestSendRefusalsCounted(t *testing.T) {
	var conns []*udp.Conn
	for range 2 {
		g, err := udp.ListenGroup(netip.MustParseAddrPort("127.0.0.1:0"), 1)
		if err != nil {
			t.Fatal(err)
		}
		defer g[0].Close()
		conns = append(conns, g[0])
	}
	tx, rx := conns[0], conns[1]
	a := newSide(t, 1, []Route{{netip.MustParsePrefix("10.2.0.0/16"), 2}, {netip.MustParsePrefix("10.3.0.0/16"), 3}})
	s := a.shards[0]
	s.cfg.Conns = []Socket{tx}
	s.sendHook = nil
	var k1, k2 [32]byte
	rand.Read(k1[:])
	rand.Read(k2[:])
	keys := crypto.NewSessionKeys(k1, k2, true)
	for peer, remote := range map[PeerID]netip.AddrPort{2: rx.LocalAddr(), 3: netip.MustParseAddrPort("127.0.0.1:0")} {
		if err := s.InstallLane(LaneConfig{Peer: peer, Index: 0, Lanes: 1, Remote: remote, Conn: 0,
			Send: keys.SendLane(0), Recv: keys.RecvLane(0), FEC: fec.EncoderConfig{K: 8, R: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	wantSent, wantBytes := 0, 0
	for i := range 10 {
		if i%3 == 1 {
			inject(t, s, ipPacket("10.1.0.5", "10.3.0.9", 300, i)) // refused
			continue
		}
		inject(t, s, ipPacket("10.1.0.5", "10.2.0.9", 100, i))
		wantSent++
		wantBytes += 100 + crypto.DataOverhead
	}
	s.flushAll()
	s.publish()
	sn := s.Snapshot()
	rb := udp.NewBatch(16)
	for i := range rb.Bufs {
		rb.Bufs[i] = make([]byte, BufSize)
	}
	got, gotBytes := 0, 0
	for deadline := time.Now().Add(2 * time.Second); got < wantSent && time.Now().Before(deadline); {
		n, err := rx.Recv(rb, rb.Len())
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			got++
			gotBytes += rb.Sizes[i]
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if got != wantSent || gotBytes != wantBytes {
		t.Fatalf("received %d datagrams (%d bytes), want %d (%d bytes)", got, gotBytes, wantSent, wantBytes)
	}
	if sn.Get(UDPOut) != uint64(got) || sn.Get(BytesOut) != uint64(gotBytes) || sn.Get(DropSend) != uint64(10-got) {
		t.Fatalf("udp_out %d bytes_out %d drop_send %d; the kernel took %d datagrams (%d bytes) of 10",
			sn.Get(UDPOut), sn.Get(BytesOut), sn.Get(DropSend), got, gotBytes)
	}
}
