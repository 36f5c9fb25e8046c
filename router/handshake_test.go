package router

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
	"github.com/yip-router/yip-router/shard/udp"
)

// memDgram is a handshake datagram a memRouter sent.
type memDgram struct {
	b  []byte
	to netip.AddrPort
}

// memRouter is a Router with one shard that never runs and no TUN: the
// handshake code runs in memory, and what it sends lands in out. addr is
// its underlay address as its peers see it.
type memRouter struct {
	*Router
	priv crypto.PrivateKey
	addr netip.AddrPort
	out  []memDgram
}

func newMemRouter(t testing.TB, addr string) *memRouter {
	t.Helper()
	priv, err := crypto.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	r := &Router{
		cfg: &config.Config{}, log: zap.NewNop(),
		local:   crypto.NewLocal(priv, true),
		cookies: crypto.NewCookieChecker(),
		peers:   map[crypto.PublicKey]*peer{}, byID: map[shard.PeerID]*peer{},
		pending: map[uint32]*peer{}, nextID: 1,
		byEndpoint: map[netip.AddrPort][]*crypto.Initiation{},
		knownRefs:  map[netip.Addr]int{},
		stop:       make(chan struct{}),
		limit:      newLimiter(), proven: newLimiter(),
	}
	t.Cleanup(r.closeResources)
	lo := netip.MustParseAddr("127.0.0.1")
	if r.group, err = udp.ListenGroup(netip.AddrPortFrom(lo, 0), 1); err != nil {
		t.Fatal(err)
	}
	lc, err := udp.ListenLane(lo, 0, randIntn)
	if err != nil {
		t.Fatal(err)
	}
	r.laneSk = []*udp.Conn{lc}
	if r.mesh, err = shard.NewMesh(1); err != nil {
		t.Fatal(err)
	}
	s, err := shard.New(shard.Config{ID: 0, CPU: -1, Mesh: r.mesh, Table: &r.table, Conns: []*udp.Conn{r.group[0], lc}})
	if err != nil {
		t.Fatal(err)
	}
	r.shards = []*shard.Shard{s}
	m := &memRouter{Router: r, priv: priv, addr: netip.MustParseAddrPort(addr)}
	r.testSend = func(_, _ int, b []byte, to netip.AddrPort) error {
		m.out = append(m.out, memDgram{append([]byte(nil), b...), to})
		return nil
	}
	return m
}

// take returns what m sent since the last take.
func (m *memRouter) take() []memDgram {
	out := m.out
	m.out = nil
	return out
}

// memPair is an initiator (ini, with the responder's endpoint configured)
// and a responder (resp).
func memPair(t *testing.T, iniAddr string) (ini, resp *memRouter) {
	t.Helper()
	ini = newMemRouter(t, iniAddr)
	resp = newMemRouter(t, "192.0.2.1:51820")
	if err := ini.setPeers([]config.Peer{{PublicKey: resp.local.PublicKey(), Endpoint: resp.addr,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.2/32")}}}); err != nil {
		t.Fatal(err)
	}
	if err := resp.setPeers([]config.Peer{{PublicKey: ini.local.PublicKey(),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}}}); err != nil {
		t.Fatal(err)
	}
	return ini, resp
}

// peerOf is m's only peer.
func (m *memRouter) peerOf(t *testing.T) *peer {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.peers {
		return p
	}
	t.Fatal("no peer")
	return nil
}

// kick runs m's timers at the time its next handshake attempt is due (now
// if none is scheduled), with traffic waiting for the peer.
func (m *memRouter) kick(t *testing.T) {
	p := m.peerOf(t)
	m.mu.Lock()
	p.want, p.wantSince = true, time.Now()
	now := time.Now()
	if p.nextTry.After(now) {
		now = p.nextTry
	}
	m.mu.Unlock()
	m.tick(now)
}

// deliver hands every datagram from sends to m from the address from, on
// m's socket conn.
func (m *memRouter) deliver(sends []memDgram, from netip.AddrPort, conn int) {
	for _, d := range sends {
		if d.to == m.addr {
			m.unmatched(0, conn, d.b, from)
		}
	}
}

// attackerInitiation is an initiation with a valid mac1 for resp from a key
// resp does not know: what anyone holding resp's public key can send.
func attackerInitiation(t testing.TB, resp *memRouter) []byte {
	t.Helper()
	ak, _ := crypto.GeneratePrivateKey()
	a := crypto.NewLocal(ak, true)
	pr, err := a.AddPeer(resp.local.PublicKey(), crypto.PresharedKey{})
	if err != nil {
		t.Fatal(err)
	}
	_, d, err := a.Initiate(pr, 1, crypto.LaneOffer{Ports: []uint16{1000}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Finding 2: initiations spoofed from the real peer's /24 (at a rate under
// and over the global cookie threshold) must not keep the real peer out: it
// is sent a cookie reply, retries with mac2 and completes.
func TestSpoofedInitiationsDoNotLockOutPeer(t *testing.T) {
	for _, flood := range []int{40, 2 * cookieThreshold} {
		t.Run(fmt.Sprint(flood), func(t *testing.T) {
			ini, resp := memPair(t, "198.51.100.7:40000")
			spoof := attackerInitiation(t, resp)
			for round := 0; round < 6 && ini.hs.completed.Load() == 0; round++ {
				for i := range flood {
					src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + i%250)}), uint16(1024+i))
					resp.unmatched(0, connGroup, spoof, src)
				}
				for _, d := range resp.take() {
					if d.to.Addr() != ini.addr.Addr() && len(d.b) > len(spoof) {
						t.Fatalf("reply of %d bytes to a %d-byte initiation", len(d.b), len(spoof))
					}
				}
				ini.kick(t)
				inits := ini.take()
				resp.deliver(inits, ini.addr, connGroup)
				replies := resp.take()
				for _, d := range replies {
					for _, in := range inits {
						// Cookie replies must not amplify (a response
						// goes only to a proven or unloaded source).
						if crypto.CookieReplyLen(len(d.b)) && len(d.b) > len(in.b) {
							t.Fatalf("reply of %d bytes to a %d-byte initiation", len(d.b), len(in.b))
						}
					}
				}
				ini.deliver(replies, resp.addr, connLane)
			}
			if ini.hs.completed.Load() != 1 {
				t.Fatalf("real peer locked out: completed %d, responder answered %d, cookies %d, rate limited %d",
					ini.hs.completed.Load(), resp.hs.answered.Load(), resp.hs.cookies.Load(), resp.hs.rateLimited.Load())
			}
			if resp.hs.cookies.Load() == 0 {
				t.Fatal("no cookie was demanded")
			}
		})
	}
}

// forgedResponse is a response to ini's pending initiation that anyone on
// the path (who saw the index and holds ini's public key) can make: valid
// mac1 and index, but not from the peer ini initiated to.
func forgedResponse(t *testing.T, ini *memRouter) []byte {
	t.Helper()
	ak, _ := crypto.GeneratePrivateKey()
	a := crypto.NewLocal(ak, true)
	if _, err := a.AddPeer(ini.local.PublicKey(), crypto.PresharedKey{}); err != nil {
		t.Fatal(err)
	}
	as := crypto.NewLocal(ini.priv, true) // to address the forged initiation's answer to ini
	pa, err := as.AddPeer(a.PublicKey(), crypto.PresharedKey{})
	if err != nil {
		t.Fatal(err)
	}
	ini.mu.Lock()
	idx := ini.peerOf0().initIndex
	ini.mu.Unlock()
	_, d, err := as.Initiate(pa, idx, crypto.LaneOffer{Ports: []uint16{1000}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	inc, err := a.ConsumeInitiation(d)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := inc.Respond(77, crypto.LaneOffer{Ports: []uint16{2000}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// peerOf0 is m's only peer; caller holds m.mu.
func (m *memRouter) peerOf0() *peer {
	for _, p := range m.peers {
		return p
	}
	return nil
}

// startHandshake has ini initiate and resp answer; it returns resp's
// response, not yet delivered.
func startHandshake(t *testing.T, ini, resp *memRouter) []memDgram {
	t.Helper()
	ini.kick(t)
	inits := ini.take()
	if len(inits) != 1 {
		t.Fatalf("%d initiations sent", len(inits))
	}
	resp.deliver(inits, ini.addr, connGroup)
	out := resp.take()
	if len(out) != 1 || resp.hs.answered.Load() != 1 {
		t.Fatalf("responder sent %d datagrams, answered %d", len(out), resp.hs.answered.Load())
	}
	return out
}

// Finding 3: forged responses to a pending initiation cost a bounded number
// of reads (each is two X25519 under no rate limit otherwise), and the
// genuine response still completes the handshake.
func TestForgedResponsesBounded(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	genuine := startHandshake(t, ini, resp)
	f := forgedResponse(t, ini)
	start := time.Now()
	for range 50 {
		if !ini.unmatched(0, connLane, f, resp.addr) {
			t.Fatal("forged response not taken as a handshake")
		}
	}
	// The burst, plus the refill while the loop ran (slow under -race).
	limit := respBurst + time.Since(start).Seconds()*respRate
	if n := ini.hs.refused.Load(); float64(n) > limit {
		t.Fatalf("%d forged responses read, limit %.1f", n, limit)
	}
	if ini.hs.completed.Load() != 0 {
		t.Fatal("forgery completed the handshake")
	}
	time.Sleep(time.Second / respRate)
	ini.deliver(genuine, resp.addr, connLane)
	if ini.hs.completed.Load() != 1 {
		t.Fatal("genuine response after forgeries did not complete the handshake")
	}
}

// Finding 5: a cookie reply that opens (anyone holding the responder's
// public key who saw our initiation can make one) stores a cookie but keeps
// the pending initiation and its retry schedule.
func TestForgedCookieReplyKeepsInitiation(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	ini.kick(t)
	inits := ini.take()
	forged, err := resp.local.CookieReply(inits[0].b, crypto.NewCookieChecker(), ini.addr, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ini.mu.Lock()
	next := ini.peerOf0().nextTry
	ini.mu.Unlock()
	if !ini.unmatched(0, connLane, forged, resp.addr) {
		t.Fatal("cookie reply not taken")
	}
	ini.mu.Lock()
	p := ini.peerOf0()
	kept, same := p.init != nil, p.nextTry.Equal(next)
	ini.mu.Unlock()
	if !kept || !same {
		t.Fatalf("cookie reply: initiation kept %v, retry schedule kept %v", kept, same)
	}
	// No immediate retry on the next timer tick either.
	ini.tick(time.Now())
	if n := len(ini.take()); n != 0 {
		t.Fatalf("%d initiations sent right after the cookie reply", n)
	}
	resp.deliver(inits, ini.addr, connGroup)
	ini.deliver(resp.take(), resp.addr, connLane)
	if ini.hs.completed.Load() != 1 {
		t.Fatal("genuine response after a forged cookie reply did not complete the handshake")
	}
}

// Finding 6: a datagram of cookie-reply length that matches nothing costs
// the same with 500 pending initiations as with one: pending initiations
// are found by endpoint, not by a scan.
func TestJunkCostIndependentOfPending(t *testing.T) {
	for _, n := range []int{1, 500} {
		m := newMemRouter(t, "198.51.100.7:40000")
		var pcs []config.Peer
		for i := range n {
			k, _ := crypto.GeneratePrivateKey()
			pcs = append(pcs, config.Peer{PublicKey: k.Public(),
				Endpoint:   netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 51820),
				AllowedIPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), 32)}})
		}
		if err := m.setPeers(pcs); err != nil {
			t.Fatal(err)
		}
		m.mu.Lock()
		for _, p := range m.peers {
			m.initiate(p, time.Now())
		}
		m.mu.Unlock()
		junk := make([]byte, 60)
		before := m.cookieScans.Load()
		const sent = 100
		for i := range sent {
			// from nowhere, and from a pending initiation's endpoint
			m.unmatched(0, connLane, junk, netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), 9))
			m.unmatched(0, connLane, junk, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, 0, 0}), 51820))
		}
		if work := m.cookieScans.Load() - before; work > sent {
			t.Fatalf("%d pending: %d initiations examined for %d junk datagrams", n, work, 2*sent)
		}
	}
}

// Answering the peer's initiation abandons our own pending one, however
// old: a late (held-back) response to it must not replace the session
// both sides just agreed on.
func TestAnsweringAbandonsOurStaleInitiation(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	held := startHandshake(t, ini, resp) // a response an on-path attacker holds back
	ini.mu.Lock()
	ini.peerOf0().initAt = time.Now().Add(-6 * time.Second)
	ini.mu.Unlock()
	resp.mu.Lock()
	rp := resp.peerOf0()
	resp.initiate(rp, time.Now())
	resp.mu.Unlock()
	ini.deliver(resp.take(), resp.addr, connGroup)
	resp.deliver(ini.take(), ini.addr, connLane)
	if ini.hs.answered.Load() != 1 || resp.hs.completed.Load() != 1 {
		t.Fatalf("answered %d, completed %d", ini.hs.answered.Load(), resp.hs.completed.Load())
	}
	if n := ini.npending.Load(); n != 0 {
		t.Fatalf("%d initiations still pending after answering", n)
	}
	ini.deliver(held, resp.addr, connLane)
	ini.mu.Lock()
	p := ini.peerOf0()
	iniLocal, iniRemote := p.sess.LocalIndex, p.sess.RemoteIndex
	ini.mu.Unlock()
	resp.mu.Lock()
	respLocal, respRemote := rp.sess.LocalIndex, rp.sess.RemoteIndex
	resp.mu.Unlock()
	if iniRemote != respLocal || iniLocal != respRemote {
		t.Fatal("a stale response replaced the session both sides agreed on")
	}
}

// The per-second initiation count never moves back: a shard whose clock
// reading is a moment older does not reset it (and let another
// threshold's worth of initiations cost a DH).
func TestUnderLoadSlotOnlyForward(t *testing.T) {
	r := &Router{}
	base := time.Unix(1_000_000, 999_999_000)
	later := base.Add(2 * time.Millisecond) // the next second
	for range cookieThreshold + 10 {
		r.underLoad(later)
	}
	r.underLoad(base)
	if !r.underLoad(later) {
		t.Fatal("a clock reading 2 ms older reset the count")
	}
}

// Reload refuses an Endpoint of the other family than the running sockets,
// as New does, instead of applying a peer nothing can be sent to.
func TestReloadRefusesOtherFamilyEndpoint(t *testing.T) {
	m := newMemRouter(t, "192.0.2.1:51820")
	m.cfg = &config.Config{Interface: config.Interface{Name: "yip0", MTU: 1400, ListenPort: 5000, PrivateKey: m.priv}}
	k, _ := crypto.GeneratePrivateKey()
	nc := &config.Config{Interface: m.cfg.Interface, Peers: []config.Peer{{Line: 7, PublicKey: k.Public(),
		Endpoint:   netip.MustParseAddrPort("[2001:db8::1]:51820"),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/32")}}}}
	if _, err := m.Reload(nc); err == nil || !strings.Contains(err.Error(), "line 7") {
		t.Fatalf("reload of an IPv6 endpoint on an IPv4 router: %v", err)
	}
	if len(m.peers) != 0 {
		t.Fatalf("%d peers applied", len(m.peers))
	}
}

// The known-address set follows every endpoint change, counting peers that
// share an address (behind one NAT): it stays known until the last one
// moves away.
func TestKnownAddressesFollowEndpoints(t *testing.T) {
	r := &Router{knownRefs: map[netip.Addr]int{}}
	known := func(a string) bool { _, ok := r.known.Load(netip.MustParseAddr(a)); return ok }
	p1, p2 := &peer{}, &peer{}
	r.setEndpoint(p1, netip.MustParseAddrPort("192.0.2.1:1000"))
	r.setEndpoint(p2, netip.MustParseAddrPort("192.0.2.1:2000"))
	if !known("192.0.2.1") {
		t.Fatal("endpoint not known")
	}
	r.setEndpoint(p1, netip.MustParseAddrPort("198.51.100.1:1000"))
	if !known("192.0.2.1") || !known("198.51.100.1") {
		t.Fatal("a shared address was forgotten while a peer still has it")
	}
	r.setEndpoint(p2, netip.AddrPort{})
	if known("192.0.2.1") || !known("198.51.100.1") {
		t.Fatal("an address no peer has is still known")
	}
	r.setEndpoint(p1, netip.MustParseAddrPort("198.51.100.1:1001")) // same address, new port
	if !known("198.51.100.1") || r.knownRefs[netip.MustParseAddr("198.51.100.1")] != 1 {
		t.Fatalf("refs %v", r.knownRefs)
	}
}

// Initiations leave from a random lane's socket, so a hub's handshakes
// spread over its shards; the retries of one handshake keep that socket,
// because a cookie is bound to the source port it was sent to.
func TestInitiationLaneRandomRetriesKeepIt(t *testing.T) {
	ini, _ := memPair(t, "192.0.2.2:40000")
	for i := 1; i < 4; i++ {
		c, err := udp.ListenLane(netip.MustParseAddr("127.0.0.1"), i, randIntn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ini.laneSk = append(ini.laneSk, c)
	}
	var lanes []int
	ini.testSend = func(sh, _ int, b []byte, to netip.AddrPort) error {
		lanes = append(lanes, sh)
		return nil
	}
	p := ini.peerOf(t)
	seen := map[int]bool{}
	for range 40 {
		lanes = lanes[:0]
		ini.mu.Lock()
		p.attempts = 0 // a new handshake
		ini.mu.Unlock()
		for range 3 { // its first attempt and two retries
			ini.kick(t)
		}
		if len(lanes) != 3 || lanes[1] != lanes[0] || lanes[2] != lanes[0] {
			t.Fatalf("one handshake's initiations left from lanes %v", lanes)
		}
		seen[lanes[0]] = true
	}
	if len(seen) < 3 {
		t.Fatalf("40 handshakes used only lanes %v of 4", seen)
	}
}
