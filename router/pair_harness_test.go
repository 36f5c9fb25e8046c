package router

import (
	"bytes"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/yip-router/yip-router/control"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/internal/memnet"
	"github.com/yip-router/yip-router/internal/testclock"
	"github.com/yip-router/yip-router/shard"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// The pair test's harness: two in-memory routers (memRouter), the clock
// they share (pair), inner flows between them (flow) and the inner
// packets those carry. TestPair (pair_test.go) says what runs over it.

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
