package shard

// The in-memory data plane the shard tests drive: two routers' shards,
// mesh and table with the syscalls replaced by slices, sessions installed
// without a handshake, inner packets, and the wire between them.

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
	return newSideConns(t, n, routes, pool, func(int) []*udp.Conn { return []*udp.Conn{nil} })
}

// newSideConns is newSidePool with shard i's sockets conns(i).
func newSideConns(t testing.TB, n int, routes []Route, pool int, conns func(i int) []*udp.Conn) *side {
	t.Helper()
	m, err := NewMesh(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	sd := &side{mesh: m, sent: make([][]wireDgram, n), tun: make([][][]byte, n)}
	sd.table.Store(NewTable(routes))
	for i := range n {
		var socks []Socket
		for _, c := range conns(i) {
			socks = append(socks, c) // a nil *udp.Conn too: never sent on (sendHook)
		}
		s, err := New(Config{ID: i, CPU: -1, Conns: socks, Mesh: m, Table: &sd.table, Pool: pool})
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
	return deliverEach(t, a, b, func(k int, _ []byte) bool { return drop == nil || !drop(k) })
}

// deliverEach is deliverAll with a wire that may change datagram k (from 1)
// in place before it arrives, or lose it (pass returns false).
func deliverEach(t testing.TB, a, b *side, pass func(k int, d []byte) bool) int {
	t.Helper()
	fed := 0
	for i := range a.shards {
		a.shards[i].flushAll()
	}
	k := 0
	for i, ds := range a.sent {
		for _, d := range ds {
			k++
			if !pass(k, d.data) {
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
