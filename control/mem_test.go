package control

import (
	"errors"
	mrand "math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/testclock"
	"github.com/yip-router/yip-router/shard"
)

// The in-memory world of the core's unit tests: a fake data plane that
// records what the core asks of it, a clock that moves only when a test
// moves it, and seeded randomness.

// sent is a handshake datagram the core sent.
type sent struct {
	sh, conn int
	b        []byte
	to       netip.AddrPort
}

// laneAt names a peer's lane.
type laneAt struct {
	peer  shard.PeerID
	index int
}

// fakePlane is a DataPlane that records.
type fakePlane struct {
	mu        sync.Mutex
	shards    int
	listen    uint16
	lanePorts []uint16
	out       []sent
	send      func(sh, conn int, b []byte, to netip.AddrPort) error // nil: record in out

	lanes     map[laneAt]shard.LaneConfig // installed lanes, latest first
	owner     map[laneAt]int              // shard that owns each lane
	installs  int
	confirms  int
	removed   map[shard.PeerID]int
	keepalive map[shard.PeerID]time.Duration
	moved     []laneAt            // MoveLane calls
	remotes   [][2]netip.AddrPort // MoveRemote calls
	follows   []int               // FollowPeer with a new IP: the shard left out
	table     *shard.Table
	steered   bool                // the listen group steers by lane remote (shard.Placement)
	known     map[netip.Addr]bool // SetKnown
	// refuseKnown makes SetKnown fail (a full map).
	refuseKnown bool
}

func newFakePlane(shards int) *fakePlane {
	f := &fakePlane{shards: shards, listen: 51000,
		lanes: map[laneAt]shard.LaneConfig{}, owner: map[laneAt]int{}, removed: map[shard.PeerID]int{},
		keepalive: map[shard.PeerID]time.Duration{}}
	for i := range shards {
		f.lanePorts = append(f.lanePorts, uint16(40000+i))
	}
	return f
}

func (f *fakePlane) Size() int           { return f.shards }
func (f *fakePlane) ListenPort() uint16  { return f.listen }
func (f *fakePlane) LanePorts() []uint16 { return append([]uint16(nil), f.lanePorts...) }

func (f *fakePlane) SendHandshake(sh, conn int, b []byte, to netip.AddrPort, _ netip.Addr) error {
	if f.send != nil {
		return f.send(sh, conn, b, to)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.out = append(f.out, sent{sh, conn, append([]byte(nil), b...), to})
	return nil
}

// InstallSession places the lanes by the data plane's rule
// (shard.Placement, as shard.Group does) and records them.
func (f *fakePlane) InstallSession(s shard.Session) []int {
	place := shard.Placement{Steered: f.steered}.Place(&s)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, lc := range s.Lanes {
		lc.Conn = s.Conn()
		k := laneAt{s.Peer, i}
		f.lanes[k], f.owner[k] = lc, place[i]
		f.installs++
		if s.Initiator() {
			f.confirms++
		}
	}
	return place
}

func (f *fakePlane) MoveLane(from int, peer shard.PeerID, _, index, to int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := laneAt{peer, index}
	if f.owner[k] == from {
		f.owner[k] = to
	}
	f.moved = append(f.moved, k)
}

func (f *fakePlane) RemovePeer(peer shard.PeerID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed[peer]++
	for k := range f.lanes {
		if k.peer == peer {
			delete(f.lanes, k)
			delete(f.owner, k)
		}
	}
}

func (f *fakePlane) SetKeepalive(peer shard.PeerID, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keepalive[peer] = d
}

func (f *fakePlane) MoveRemote(_ shard.PeerID, from, to netip.AddrPort) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.remotes = append(f.remotes, [2]netip.AddrPort{from, to})
}

func (f *fakePlane) SetKnown(a netip.Addr, known bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.known == nil {
		f.known = map[netip.Addr]bool{}
	}
	if f.refuseKnown {
		return errors.New("map full")
	}
	if known {
		f.known[a] = true
	} else {
		delete(f.known, a)
	}
	return nil
}

func (f *fakePlane) isKnown(a netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.known[a]
}

func (f *fakePlane) FollowPeer(except int, _ shard.PeerID, _ int, from, to netip.AddrPort) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if from.Addr() != to.Addr() {
		f.follows = append(f.follows, except)
	}
}

func (f *fakePlane) SetRoutes(t *shard.Table) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.table = t
}

// fakeClock moves only when a test moves it.
type fakeClock = testclock.Clock

// seeded is Random from a seeded PCG: runs repeat exactly.
type seeded struct{ *mrand.Rand }

func (s seeded) Uint32() uint32 { return s.Rand.Uint32() }

// memCore is a Core in the in-memory world. addr is its underlay address
// as its peers see it.
type memCore struct {
	*Core
	priv  crypto.PrivateKey
	addr  netip.AddrPort
	plane *fakePlane
	clock *fakeClock
}

// epoch is where every fake clock starts.
var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newMemCore(t testing.TB, addr string, shards int, clock *fakeClock) *memCore {
	t.Helper()
	priv, err := crypto.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if clock == nil {
		clock = testclock.New(epoch)
	}
	f := newFakePlane(shards)
	f.listen = netip.MustParseAddrPort(addr).Port() // the address it answers from
	c := New(Deps{Local: crypto.NewLocal(priv, true), Plane: f, Now: clock.Now,
		Rand: seeded{mrand.New(mrand.NewPCG(uint64(len(addr)), 7))}})
	return &memCore{Core: c, priv: priv, addr: netip.MustParseAddrPort(addr), plane: f, clock: clock}
}

// take returns what m sent since the last take.
func (m *memCore) take() []sent {
	m.plane.mu.Lock()
	defer m.plane.mu.Unlock()
	out := m.plane.out
	m.plane.out = nil
	return out
}

// deliver hands every datagram of sends addressed to m to it, from the
// address from, on m's socket conn.
func (m *memCore) deliver(sends []sent, from netip.AddrPort, conn int) {
	for _, d := range sends {
		if d.to == m.addr {
			m.Unmatched(0, conn, d.b, from, netip.Addr{})
		}
	}
}

// memPair is an initiator (ini, with the responder's endpoint configured)
// and a responder (resp) on one clock, one shard each.
func memPair(t testing.TB, iniAddr string) (ini, resp *memCore) {
	t.Helper()
	return memPairShards(t, iniAddr, 1, 1)
}

// memPairShards is memPair with iniShards and respShards shards.
func memPairShards(t testing.TB, iniAddr string, iniShards, respShards int) (ini, resp *memCore) {
	t.Helper()
	clock := testclock.New(epoch)
	ini = newMemCore(t, iniAddr, iniShards, clock)
	resp = newMemCore(t, "192.0.2.1:51820", respShards, clock)
	if err := ini.SetPeers([]config.Peer{{PublicKey: resp.local.PublicKey(), Endpoint: resp.addr,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.2/32")}}}); err != nil {
		t.Fatal(err)
	}
	if err := resp.SetPeers([]config.Peer{{PublicKey: ini.local.PublicKey(),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}}}); err != nil {
		t.Fatal(err)
	}
	return ini, resp
}

// peerOf is m's only peer.
func (m *memCore) peerOf(t testing.TB) *peer {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.peers {
		return p
	}
	t.Fatal("no peer")
	return nil
}

// locked runs f under m's lock.
func (m *memCore) locked(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f()
}

// kick has traffic wait for m's only peer and runs m's timers at the time
// its next handshake attempt is due (moving the clock there), or now.
func (m *memCore) kick(t testing.TB) {
	m.kickPeer(m.peerOf(t))
}

// kickPeer is kick for peer p.
func (m *memCore) kickPeer(p *peer) {
	m.NoSession(0, p.id)
	var next time.Time
	m.locked(func() { next = p.nextTry })
	if d := next.Sub(m.clock.Now()); d > 0 {
		m.clock.Advance(d)
	}
	m.Tick(m.clock.Now())
}

// handshake runs one complete handshake from ini to resp, with the
// datagrams crossing the network at once.
func handshake(t testing.TB, ini, resp *memCore) {
	t.Helper()
	ini.kick(t)
	resp.deliver(ini.take(), ini.addr, ConnGroup)
	ini.deliver(resp.take(), resp.addr, ConnLane)
	if ini.peerOf(t).sess == nil || resp.peerOf(t).sess == nil {
		t.Fatal("handshake did not complete")
	}
}

// attackerInitiation is an initiation with a valid mac1 for resp from a key
// resp does not know: what anyone holding resp's public key can send (resp
// recognises it when one of its peers has no PSK).
func attackerInitiation(t testing.TB, resp *memCore) []byte {
	t.Helper()
	return attackerInitiations(t, resp, 1)[0]
}

// attackerInitiations is n distinct attacker initiations (resp drops a
// repeated one as a replay).
func attackerInitiations(t testing.TB, resp *memCore, n int) [][]byte {
	t.Helper()
	return keyedInitiations(t, resp, crypto.PresharedKey{}, n)
}

// keyedInitiations is n initiations to resp from an unknown key, masked
// and MACed for resp's peers with PSK psk (zero: the public-key-only form).
func keyedInitiations(t testing.TB, resp *memCore, psk crypto.PresharedKey, n int) [][]byte {
	t.Helper()
	ak, _ := crypto.GeneratePrivateKey()
	a := crypto.NewLocal(ak, true)
	pr, err := a.AddPeer(resp.local.PublicKey(), psk)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, n)
	for i := range out {
		_, out[i], err = a.Initiate(pr, uint32(i), crypto.LaneOffer{Ports: []uint16{1000}}, resp.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// peerOf0 is m's only peer; caller holds m.mu.
func (m *memCore) peerOf0() *peer {
	for _, p := range m.peers {
		return p
	}
	return nil
}

// restarted is ini after a restart: a new core of one shard with the same
// key and clock, and resp as its only peer (at its Endpoint).
func restarted(t *testing.T, ini, resp *memCore) *memCore {
	t.Helper()
	ini2 := &memCore{Core: New(Deps{Local: crypto.NewLocal(ini.priv, true), Plane: newFakePlane(1), Now: ini.clock.Now}),
		priv: ini.priv, addr: ini.addr, clock: ini.clock}
	ini2.plane = ini2.dp.(*fakePlane)
	if err := ini2.SetPeers([]config.Peer{{PublicKey: resp.local.PublicKey(), Endpoint: resp.addr}}); err != nil {
		t.Fatal(err)
	}
	return ini2
}
