package shard

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/ring"
	"github.com/yip-router/yip-router/shard/udp"
)

// side is one router's data plane in memory: shards, a mesh and a table,
// with the syscalls replaced by slices.
type side struct {
	shards []*Shard
	mesh   *Mesh
	table  atomic.Pointer[Table]
	sent   [][]wireDgram // per shard: datagrams "sent"
	tun    [][][]byte    // per shard: packets "written to TUN"
}

type wireDgram struct {
	to   netip.AddrPort
	data []byte
}

func newSide(t testing.TB, n int, routes []Route) *side {
	t.Helper()
	return newSidePool(t, n, routes, 1024)
}

// newSidePool is newSide with pool buffers per shard.
func newSidePool(t testing.TB, n int, routes []Route, pool int) *side {
	t.Helper()
	m, err := NewMesh(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	sd := &side{mesh: m, sent: make([][]wireDgram, n), tun: make([][][]byte, n)}
	sd.table.Store(NewTable(routes))
	for i := range n {
		s, err := New(Config{ID: i, CPU: -1, Conns: []*udp.Conn{nil}, Mesh: m, Table: &sd.table, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		s.sendHook = func(c int, b *udp.Batch, k int) {
			for j := range k {
				sd.sent[i] = append(sd.sent[i], wireDgram{b.Addrs[j], bytes.Clone(b.Bufs[j][:b.Sizes[j]])})
			}
		}
		s.tunOut = func(p []byte) error {
			sd.tun[i] = append(sd.tun[i], bytes.Clone(p))
			return nil
		}
		s.now = time.Now()
		sd.shards = append(sd.shards, s)
	}
	return sd
}

var (
	addrA = netip.MustParseAddrPort("192.0.2.1:40000")
	addrB = netip.MustParseAddrPort("192.0.2.2:51820")
)

// connect installs a session of min(len(a), len(b)) lanes between two
// sides, as the router will after a handshake. Peer ids: a knows b as 2, b
// knows a as 1.
func connect(t testing.TB, a, b *side, fc fec.EncoderConfig) {
	t.Helper()
	connectHold(t, a, b, fc, false)
}

// connectHold is connect with fresh keys; holdB makes b's lanes hold their
// old keys for sending until a datagram arrives under the new (rekey
// responder).
func connectHold(t testing.TB, a, b *side, fc fec.EncoderConfig, holdB bool) {
	t.Helper()
	var k1, k2 [32]byte
	rand.Read(k1[:])
	rand.Read(k2[:])
	ka, kb := crypto.NewSessionKeys(k1, k2, true), crypto.NewSessionKeys(k1, k2, false)
	lanes := min(len(a.shards), len(b.shards))
	for i := range lanes {
		la := netip.AddrPortFrom(addrA.Addr(), addrA.Port()+uint16(i))
		for _, x := range []struct {
			sd     *side
			keys   crypto.SessionKeys
			peer   PeerID
			remote netip.AddrPort
		}{{a, ka, 2, addrB}, {b, kb, 1, la}} {
			if err := x.sd.shards[i].InstallLane(LaneConfig{
				Peer: x.peer, Index: i, Lanes: lanes, Remote: x.remote, Conn: 0,
				Send: x.keys.SendLane(i), Recv: x.keys.RecvLane(i), FEC: fc,
				HoldTx: holdB && x.sd == b,
			}); err != nil {
				t.Fatal(err)
			}
			for j, s := range x.sd.shards {
				if j != i {
					recv := x.keys.RecvLane(i)
					s.SetLaneOwner(x.peer, lanes, i, i, x.remote, &recv)
				}
			}
		}
	}
}

// ipPacket makes an inner packet from src to dst with n bytes in all.
func ipPacket(src, dst string, n int, seq int) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	if s.Is4() {
		p := make([]byte, max(n, 20))
		p[0], p[9] = 0x45, 17
		binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
		copy(p[12:], s.AsSlice())
		copy(p[16:], d.AsSlice())
		if len(p) > 24 {
			binary.BigEndian.PutUint32(p[20:], uint32(seq))
		}
		return p
	}
	p := make([]byte, max(n, 40))
	p[0], p[6] = 0x60, 17
	binary.BigEndian.PutUint16(p[4:], uint16(len(p)-40))
	copy(p[8:], s.AsSlice())
	copy(p[24:], d.AsSlice())
	if len(p) > 44 {
		binary.BigEndian.PutUint32(p[40:], uint32(seq))
	}
	return p
}

// inject puts a TUN packet into shard s's egress path.
func inject(t testing.TB, s *Shard, pkt []byte) {
	t.Helper()
	p := s.pool.Get()
	if p == nil {
		t.Fatal("pool empty")
	}
	p.N = copy(p.Buf[headroom:], pkt)
	s.count(TunIn)
	s.egress(p)
}

// deliverAll feeds every datagram a sent to b's shard that owns it (by
// lane index = source port offset, as the steering program would), and
// returns how many it fed. drop decides which to lose on the "wire".
func deliverAll(t testing.TB, a, b *side, drop func(i int) bool) int {
	t.Helper()
	fed := 0
	for i := range a.shards {
		a.shards[i].flushAll()
	}
	k := 0
	for i, ds := range a.sent {
		for _, d := range ds {
			k++
			if drop != nil && drop(k) {
				continue
			}
			// Which b shard: a's shard i owns lane i; b's lane i is on b's
			// shard i. Source address: a's lane address for lane i.
			s := b.shards[i%len(b.shards)]
			p := s.pool.Get()
			p.N = copy(p.Buf, d.data)
			p.Addr = netip.AddrPortFrom(addrA.Addr(), addrA.Port()+uint16(i))
			if d.to.Addr() == addrA.Addr() {
				p.Addr = addrB
			}
			s.ingress(0, p.Buf[:p.N], p.Addr)
			s.pool.Put(p)
			fed++
		}
		a.sent[i] = nil
	}
	return fed
}

var routesA = []Route{{netip.MustParsePrefix("10.2.0.0/16"), 2}, {netip.MustParsePrefix("fd00:2::/64"), 2}}
var routesB = []Route{{netip.MustParsePrefix("10.1.0.0/16"), 1}, {netip.MustParsePrefix("fd00:1::/64"), 1}}

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
// egress (route, seal, FEC, frame, stage) and ingress (lane lookup, tag,
// unmask, FEC, open, source check, TUN write).
func TestPipelineZeroAlloc(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 2})
	sa, sb := a.shards[0], b.shards[0]
	pkt := ipPacket("10.1.0.5", "10.2.0.9", 1400, 1)
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
}

var _ = ring.Packet{}

// relay keeps what shard from sends in buffers allocated once and feeds it
// to another shard's ingress, as from A's address: the wire of the
// zero-allocation tests, which must allocate nothing itself.
type relay struct {
	store [][]byte
	n     int
}

func newRelay(from *Shard, capacity int) *relay {
	r := &relay{store: make([][]byte, capacity)}
	for i := range r.store {
		r.store[i] = make([]byte, BufSize)
	}
	from.sendHook = func(_ int, bt *udp.Batch, k int) {
		for j := range k {
			r.store[r.n] = r.store[r.n][:copy(r.store[r.n][:BufSize], bt.Bufs[j][:bt.Sizes[j]])]
			r.n++
		}
	}
	return r
}

// deliver runs to's ingress on everything sent since the last deliver.
func (r *relay) deliver(to *Shard) {
	for _, d := range r.store[:r.n] {
		p := to.pool.Get()
		p.N, p.Addr = copy(p.Buf, d), addrA
		to.ingress(0, p.Buf[:p.N], p.Addr)
		to.pool.Put(p)
	}
	r.n = 0
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
	if _, _, err := sa.lanes[addrB].rxf.Deframe(append([]byte(nil), d...)); err != nil {
		t.Fatalf("B still sends under the old keys after confirmation: %v", err)
	}
	deliverAll(t, b, a, nil)
	if len(a.tun[0]) != 2 {
		t.Fatalf("A got %d of 2", len(a.tun[0]))
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

// Two rekeys answered in a row with HoldTx, the first response lost: the
// initiator still has the first keys, so the responder must keep them as
// prev (not the never-used middle keys) and keep sending under them.
func TestPipelineDoubleHoldKeepsConfirmedKeys(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 1})
	sb := b.shards[0]
	first := sb.lanes[addrA].cfg
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
	s.cfg.Conns = []*udp.Conn{tx}
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
	ln := sb.lanes[addrA]
	cfg := ln.cfg
	cfg.Lanes = 2
	if err := sb.InstallLane(cfg); err != nil {
		t.Fatal(err)
	}
	check("after the lane count changed", 30, 3, 1)
	sb.RemovePeer(1)
	check("after the peer was removed", 30, 3, 1)
}
