package shard

// A Group as the router runs it: its shards' loops over internal/memnet,
// driven only through the Group's methods (what control.DataPlane sees).

import (
	"crypto/rand"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/internal/memnet"
)

// loopGroup is one router's Group over memnet: shard i has a listen-group
// member at listen and a lane socket at lane(i), and a TUN queue; hooks
// record what the shards tell the control core.
type loopGroup struct {
	g    *Group
	tuns []*memnet.TUN

	mu        sync.Mutex
	unmatched []unmatchedAt
	noSession []PeerID
}

type unmatchedAt struct {
	shard, conn int
	data        string
	from        netip.AddrPort
}

func newLoopGroup(t *testing.T, w *memnet.Wire, n int, listen netip.AddrPort, lane func(i int) netip.AddrPort, routes []Route) *loopGroup {
	t.Helper()
	g, err := NewGroup(n, nil, func(err error) { t.Errorf("lane refused: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	lg := &loopGroup{g: g}
	g.SetRoutes(NewTable(routes))
	for i := range n {
		var socks []Socket
		for _, a := range []netip.AddrPort{ConnGroup: listen, ConnLane: lane(i)} {
			s, err := w.Listen(a)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			socks = append(socks, s)
		}
		tun, err := memnet.NewTUN()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tun.Close() })
		lg.tuns = append(lg.tuns, tun)
		if _, err := g.Add(Config{CPU: -1, TUN: tun, Conns: socks, Pool: 1024,
			Unmatched: func(sh, conn int, data []byte, from netip.AddrPort, _ netip.Addr) Verdict {
				lg.mu.Lock()
				defer lg.mu.Unlock()
				lg.unmatched = append(lg.unmatched, unmatchedAt{sh, conn, string(data), from})
				return Answered
			},
			NoSession: func(_ int, peer PeerID) {
				lg.mu.Lock()
				defer lg.mu.Unlock()
				lg.noSession = append(lg.noSession, peer)
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, n)
	for _, s := range g.Shards() {
		go func() { done <- s.Run() }()
	}
	t.Cleanup(func() {
		for _, s := range g.Shards() {
			s.Stop()
		}
		for range n {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(loopWait):
				t.Fatal("a shard's loop did not return after Stop")
			}
		}
	})
	return lg
}

// waitFor polls cond (under lg.mu) until it holds or loopWait passed.
func (lg *loopGroup) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(loopWait); ; time.Sleep(time.Millisecond) {
		lg.mu.Lock()
		ok := cond()
		lg.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", loopWait, what)
		}
	}
}

// query runs f on shard i's goroutine and waits for it.
func (lg *loopGroup) query(t *testing.T, i int, f func(*Shard)) {
	t.Helper()
	if err := lg.g.Shards()[i].Query(f, loopWait); err != nil {
		t.Fatal(err)
	}
}

// Two routers' groups of two shards: the ports they report, handshake
// datagrams from either socket, a session installed on both (initiator
// and responder), packets both ways on both lanes, and then the calls the
// control core makes later: a new keepalive, a new endpoint, the peer
// removed, routes replaced.
func TestGroupOverMemnet(t *testing.T) {
	w := memnet.NewWire()
	ipA, ipB := addrA.Addr(), addrB.Addr()
	lanePort := func(ip netip.Addr) func(int) netip.AddrPort {
		return func(i int) netip.AddrPort { return netip.AddrPortFrom(ip, 40000+uint16(i)) }
	}
	a := newLoopGroup(t, w, 2, netip.AddrPortFrom(ipA, 51820), lanePort(ipA), routesA)
	b := newLoopGroup(t, w, 2, addrB, lanePort(ipB), routesB)
	if a.g.Size() != 2 || a.g.ListenPort() != 51820 || !slices.Equal(a.g.LanePorts(), []uint16{40000, 40001}) {
		t.Fatalf("size %d, listen port %d, lane ports %v", a.g.Size(), a.g.ListenPort(), a.g.LanePorts())
	}

	// An initiation leaves from a lane socket and reaches the listen
	// group's member its port steers to; the answer leaves from that
	// member and comes back to the lane socket.
	if err := a.g.SendHandshake(1, ConnLane, []byte("initiation"), addrB, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	wantB := unmatchedAt{1, ConnGroup, "initiation", lanePort(ipA)(1)}
	var got []unmatchedAt
	b.waitFor(t, "the initiation", func() bool { got = slices.Clone(b.unmatched); return len(got) > 0 })
	if len(got) != 1 || got[0] != wantB {
		t.Fatalf("B got %+v, want %+v", got, wantB)
	}
	if err := b.g.SendHandshake(1, ConnGroup, []byte("response"), lanePort(ipA)(1), netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	wantA := unmatchedAt{1, ConnLane, "response", addrB}
	a.waitFor(t, "the response", func() bool { got = slices.Clone(a.unmatched); return len(got) > 0 })
	if len(got) != 1 || got[0] != wantA {
		t.Fatalf("A got %+v, want %+v", got, wantA)
	}

	// The session: A initiated, B answered on shard 0 from A's lane 0.
	var k1, k2 [32]byte
	rand.Read(k1[:])
	rand.Read(k2[:])
	ka, kb := crypto.NewSessionKeys(k1, k2, true), crypto.NewSessionKeys(k1, k2, false)
	sa := Session{Peer: 2, Arrived: -1, FromLane: 0}
	sb := Session{Peer: 1, Arrived: 0, FromLane: 0}
	for i := range 2 {
		sa.Lanes = append(sa.Lanes, LaneConfig{Peer: 2, Index: i, Lanes: 2, Remote: addrB,
			Send: ka.SendLane(i), Recv: ka.RecvLane(i), FEC: fec.EncoderConfig{K: 8, R: 2}})
		sb.Lanes = append(sb.Lanes, LaneConfig{Peer: 1, Index: i, Lanes: 2, Remote: lanePort(ipA)(i),
			Send: kb.SendLane(i), Recv: kb.RecvLane(i), FEC: fec.EncoderConfig{K: 8, R: 2}})
	}
	if pa, pb := a.g.InstallSession(sa), b.g.InstallSession(sb); !slices.Equal(pa, []int{0, 1}) || !slices.Equal(pb, []int{0, 1}) {
		t.Fatalf("placements %v and %v, want lane i on shard i", pa, pb)
	}
	for i := range 2 {
		a.tuns[i].Inject(ipPacket("10.1.0.5", "10.2.0.9", 100, i))
		if got := seqs(takeN(t, b.tuns[i], 1)); got[0] != i {
			t.Fatalf("B's shard %d wrote packet %d, want %d", i, got[0], i)
		}
		b.tuns[i].Inject(ipPacket("10.2.0.9", "10.1.0.5", 100, 10+i))
		if got := seqs(takeN(t, a.tuns[i], 1)); got[0] != 10+i {
			t.Fatalf("A's shard %d wrote packet %d, want %d", i, got[0], 10+i)
		}
	}

	// A new keepalive reaches every lane of the peer; a new endpoint moves
	// the lanes that talked to the old one, and only those.
	b.g.SetKeepalive(1, 25*time.Second)
	moved := netip.MustParseAddrPort("203.0.113.7:40000")
	b.g.MoveRemote(1, lanePort(ipA)(0), moved)
	for i, want := range []netip.AddrPort{moved, lanePort(ipA)(1)} {
		var ka time.Duration
		var st []LaneStatus
		b.query(t, i, func(s *Shard) { ka, st = s.ownedLane(1, i).cfg.Keepalive, s.LaneStatuses() })
		if ka != 25*time.Second || len(st) != 1 || st[0].Remote != want {
			t.Fatalf("B's lane %d: keepalive %v, status %+v; want 25s at %v", i, ka, st, want)
		}
	}

	// The peer removed: its lanes go from every shard, and its packets
	// wait for a new handshake, which the core is asked for.
	a.mu.Lock()
	asked := len(a.noSession)
	a.mu.Unlock()
	if asked != 0 {
		t.Fatalf("asked for %d handshakes while the session stood", asked)
	}
	a.g.RemovePeer(2)
	for i := range 2 {
		var st []LaneStatus
		a.query(t, i, func(s *Shard) { st = s.LaneStatuses() })
		if len(st) != 0 {
			t.Fatalf("A's shard %d kept lanes %+v of the removed peer", i, st)
		}
	}
	a.tuns[1].Inject(ipPacket("10.1.0.5", "10.2.0.9", 100, 99))
	a.waitFor(t, "the ask for a handshake", func() bool { return slices.Contains(a.noSession, 2) })

	// Routes replaced: the packet's destination has no peer now.
	a.g.SetRoutes(NewTable(nil))
	a.tuns[0].Inject(ipPacket("10.1.0.5", "10.2.0.9", 100, 100))
	for deadline := time.Now().Add(loopWait); ; time.Sleep(time.Millisecond) {
		var dropped uint64
		a.query(t, 0, func(s *Shard) { dropped = s.stats.c[DropNoRoute] })
		if dropped == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drop_no_route %d after the routes were replaced, want 1", dropped)
		}
	}
}
