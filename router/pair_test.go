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
	"bytes"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/control"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/internal/memnet"
	"github.com/yip-router/yip-router/internal/testclock"
	"github.com/yip-router/yip-router/shard"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

const (
	pairShards = 2
	// pairRekey is the cores' RekeyAfter (the default): the waits move
	// their clock in step with real time, seconds in all, so only the
	// rekey step's jump rekeys.
	pairRekey = control.DefaultRekeyAfter
	// pairWait bounds every wait in real time: generous, for a busy
	// machine under -race; a passing run takes about half a second.
	pairWait = 20 * time.Second
	// pairListen is both routers' ListenPort; lane socket i is on
	// pairLanePort+i, whose low bits steer it to group member i
	// (memnet.Wire.Listen), so lanes land where they are placed.
	pairListen   = 51820
	pairLanePort = 40000
	// The wire loses one datagram of each path in every pairLossLo to
	// pairLossHi (5%; memnet.Spaced), which FEC 8:2 recovers whole when a
	// group's datagrams are consecutive on the wire: bulkSize.
	pairLossLo, pairLossHi = 15, 25
)

var pairFEC = fec.Mode{Kind: fec.ModeFixed, K: 8, R: 2}

// pairRand is seeded randomness for a core (control.Random), locked: the
// core draws from it on shard goroutines too.
type pairRand struct {
	mu sync.Mutex
	r  *mrand.Rand
}

func (p *pairRand) IntN(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.r.IntN(n)
}

func (p *pairRand) Uint32() uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.r.Uint32()
}

// memRouter is one router of the pair.
type memRouter struct {
	name   string
	key    crypto.PublicKey
	addr   netip.Addr // underlay, where its sockets are bound
	inner  netip.Addr // its tunnel address
	core   *control.Core
	shards []*shard.Shard
	tuns   []*memnet.TUN
	ticks  chan time.Time
}

// newMemRouter starts a router with pairShards shards at addr on w, with
// the cores' clock; it stops when the test ends.
func newMemRouter(t *testing.T, w *memnet.Wire, clock *testclock.Clock, name, addr, inner string, seed uint64) *memRouter {
	t.Helper()
	priv, err := crypto.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	local := crypto.NewLocal(priv, true)
	r := &memRouter{name: name, key: local.PublicKey(), addr: netip.MustParseAddr(addr),
		inner: netip.MustParseAddr(inner), ticks: make(chan time.Time)}
	log := zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel)).Named(name)
	plane, err := shard.NewGroup(pairShards, nil, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Close)
	// Shard i's sockets: a member of the listen group, its lane socket.
	var group, lanes []*memnet.Socket
	for i := range pairShards {
		g, err := w.Listen(netip.AddrPortFrom(r.addr, pairListen))
		if err != nil {
			t.Fatal(err)
		}
		l, err := w.Listen(netip.AddrPortFrom(r.addr, uint16(pairLanePort+i)))
		if err != nil {
			t.Fatal(err)
		}
		q, err := memnet.NewTUN()
		if err != nil {
			t.Fatal(err)
		}
		group, lanes, r.tuns = append(group, g), append(lanes, l), append(r.tuns, q)
	}
	r.core = control.New(control.Deps{Local: local, Plane: plane, Log: log, Now: clock.Now,
		Rand: &pairRand{r: mrand.New(mrand.NewPCG(seed, 26))}, RekeyAfter: pairRekey, FEC: pairFEC})
	for i := range pairShards {
		if _, err := plane.Add(withCore(shard.Config{CPU: -1, TUN: r.tuns[i],
			Conns: []shard.Socket{shard.ConnGroup: group[i], shard.ConnLane: lanes[i]},
			Pool:  2048}, r.core)); err != nil {
			t.Fatal(err)
		}
	}
	r.shards = plane.Shards()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range r.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(); err != nil {
				t.Errorf("%s: shard %d: %v", name, s.ID(), err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		controlLoop(r.core, stop, r.ticks)
	}()
	t.Cleanup(func() {
		close(stop)
		for _, s := range r.shards {
			s.Stop()
		}
		wg.Wait()
		for _, c := range append(group, lanes...) {
			c.Close()
		}
		for _, q := range r.tuns {
			q.Close()
		}
	})
	return r
}

// peer is r's only peer as its core sees it (zero: none).
func (r *memRouter) peer() control.PeerInfo {
	ps := r.core.Peers()
	if len(ps) != 1 {
		return control.PeerInfo{}
	}
	return ps[0]
}

// lanes are the lanes each of r's shards owns, as the shards report them.
func (r *memRouter) lanes(t *testing.T) [][]shard.LaneStatus {
	t.Helper()
	out := make([][]shard.LaneStatus, len(r.shards))
	for i, s := range r.shards {
		if err := s.Query(func(s *shard.Shard) { out[i] = s.LaneStatuses() }, pairWait); err != nil {
			t.Fatalf("%s: shard %d: %v", r.name, i, err)
		}
	}
	return out
}

// count sums counter c over r's shards, as last published.
func (r *memRouter) count(c shard.Counter) uint64 {
	var n uint64
	for _, s := range r.shards {
		snap := s.Snapshot()
		n += snap.Get(c)
	}
	return n
}

// pair is the two routers, their wire and their clock.
type pair struct {
	wire  *memnet.Wire
	clock *testclock.Clock
	a, b  *memRouter
}

// tick moves the clock by d and runs both cores' timers there.
func (p *pair) tick(d time.Duration) {
	now := p.clock.Advance(d)
	p.a.ticks <- now
	p.b.ticks <- now
}

// within waits for ok, for at most pairWait of real time. Meanwhile it
// runs the cores' timers every TimerPeriod, moving their clock by as
// much: in step with real time, as the router's control loop, so a
// response has the real second a retry waits for (a clock that ran ahead
// would retry handshakes whose responses are merely slow).
func (p *pair) within(ok func() bool) bool {
	start := time.Now()
	next := start
	for !ok() {
		now := time.Now()
		if now.Sub(start) > pairWait {
			return false
		}
		if !now.Before(next) {
			p.tick(control.TimerPeriod)
			next = next.Add(control.TimerPeriod)
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// flow is the inner packets one router sends the other through its TUN
// queues, by sequence number, and what arrived of them.
type flow struct {
	name     string
	from, to *memRouter
	next     uint32
	want     map[uint32][]byte // sent, not arrived
	got      int               // arrived
	seen     map[uint32]bool
	size     func(seq uint32) int
}

func newFlow(from, to *memRouter) *flow {
	return &flow{name: from.name + "→" + to.name, from: from, to: to,
		want: map[uint32][]byte{}, seen: map[uint32]bool{}, size: mixedSize}
}

// Inner packet sizes. mixedSize spans every FEC size class; bulkSize keeps
// to the largest, as a bulk transfer's packets do. The encoder groups
// symbols by size class, so the groups of a rarer class span more of the
// wire, and losses pairLossLo apart may take three symbols of one;
// in one class a group's ten datagrams are consecutive (but for a control
// frame) and lose one at most.
func mixedSize(seq uint32) int { return 64 + int(seq*97%1200) }
func bulkSize(seq uint32) int  { return 1100 + int(seq*97%200) }

// send writes n packets into from's TUN queues, alternately, so each
// shard sends on its own lane.
func (f *flow) send(n int) {
	for range n {
		f.next++
		p := innerPacket(f.from.inner, f.to.inner, f.next, f.size(f.next))
		f.want[f.next] = p
		f.from.tuns[int(f.next)%len(f.from.tuns)].Inject(p)
	}
}

// take checks what reached to's TUN queues: each packet once, as sent.
func (f *flow) take(t *testing.T) {
	t.Helper()
	for _, q := range f.to.tuns {
		for _, p := range q.Take() {
			seq, ok := seqOf(p)
			w, sent := f.want[seq]
			switch {
			case !ok:
				t.Errorf("%s: not one of our packets: % x", f.name, p)
			case f.seen[seq]:
				t.Errorf("%s: packet %d arrived twice", f.name, seq)
			case !sent:
				t.Errorf("%s: packet %d was never sent", f.name, seq)
			case !bytes.Equal(p, w):
				t.Errorf("%s: packet %d changed on the way:\n got % x\nwant % x", f.name, seq, p, w)
			default:
				delete(f.want, seq)
				f.seen[seq] = true
				f.got++
			}
		}
	}
}

// await waits until every packet the flows sent arrived.
func (p *pair) await(t *testing.T, fs ...*flow) {
	t.Helper()
	ok := p.within(func() bool {
		n := 0
		for _, f := range fs {
			f.take(t)
			n += len(f.want)
		}
		return n == 0
	})
	if !ok {
		for _, f := range fs {
			if len(f.want) > 0 {
				t.Errorf("%s: %d of %d packets did not arrive", f.name, len(f.want), int(f.next))
			}
		}
		p.dump(t)
		t.FailNow()
	}
}

// dump logs what the routers' shards counted and their lanes.
func (p *pair) dump(t *testing.T) {
	t.Helper()
	for _, r := range []*memRouter{p.a, p.b} {
		for i, s := range r.shards {
			snap := s.Snapshot()
			var b bytes.Buffer
			for _, c := range shard.Counters() {
				if v := snap.Get(c); v != 0 {
					fmt.Fprintf(&b, " %s=%d", c, v)
				}
			}
			t.Logf("%s shard %d:%s", r.name, i, b.String())
		}
		t.Logf("%s lanes: %+v", r.name, r.lanes(t))
	}
	t.Logf("wire: %+v", p.wire.Stats())
}

// innerPacket is an IPv4/UDP packet of n bytes from src to dst carrying seq
// and bytes drawn from it.
func innerPacket(src, dst netip.Addr, seq uint32, n int) []byte {
	p := make([]byte, n)
	p[0], p[8], p[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(p[2:], uint16(n))
	copy(p[12:16], src.AsSlice())
	copy(p[16:20], dst.AsSlice())
	binary.BigEndian.PutUint16(p[10:], ipChecksum(p[:20]))
	binary.BigEndian.PutUint16(p[20:], 5000)
	binary.BigEndian.PutUint16(p[22:], 6000)
	binary.BigEndian.PutUint16(p[24:], uint16(n-20))
	binary.BigEndian.PutUint32(p[28:], seq)
	for i := 32; i < n; i++ {
		p[i] = byte(seq) ^ byte(i*31)
	}
	return p
}

func ipChecksum(h []byte) uint16 {
	var s uint32
	for i := 0; i < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

func seqOf(p []byte) (uint32, bool) {
	if len(p) < 32 || p[0] != 0x45 || p[9] != 17 {
		return 0, false
	}
	return binary.BigEndian.Uint32(p[28:]), true
}

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
