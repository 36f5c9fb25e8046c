package control

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
)

// Handshakes under attack: the review's findings, each with the test that
// failed before its fix.

// Finding 2: initiations spoofed from the real peer's /24 (at a rate under
// and over the global cookie threshold) must not keep the real peer out: it
// is sent a cookie reply, retries with mac2 and completes.
func TestSpoofedInitiationsDoNotLockOutPeer(t *testing.T) {
	for _, flood := range []int{40, 2 * cookieThreshold} {
		t.Run(fmt.Sprint(flood), func(t *testing.T) {
			ini, resp := memPair(t, "198.51.100.7:40000")
			spoofs := attackerInitiations(t, resp, flood)
			for round := 0; round < 6 && ini.hs.completed.Load() == 0; round++ {
				if round > 0 {
					spoofs = attackerInitiations(t, resp, flood)
				}
				// Each spoof has its own source and its own drawn length:
				// a reply must be no longer than the one it answers.
				spoofLen := map[netip.AddrPort]int{}
				for i, spoof := range spoofs {
					src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + i%250)}), uint16(1024+i))
					resp.Unmatched(0, ConnGroup, spoof, src, netip.Addr{})
					spoofLen[src] = len(spoof)
				}
				for _, d := range resp.take() {
					if d.to.Addr() != ini.addr.Addr() && len(d.b) > spoofLen[d.to] {
						t.Fatalf("reply of %d bytes to a %d-byte initiation", len(d.b), spoofLen[d.to])
					}
				}
				ini.kick(t)
				inits := ini.take()
				resp.deliver(inits, ini.addr, ConnGroup)
				replies := resp.take()
				for _, d := range replies {
					for _, in := range inits {
						// Cookie replies must not amplify (a response
						// goes only to a proven or unloaded source, and
						// may be up to PadHeadroom longer).
						if typ, _, _ := ini.local.Classify(d.b); typ != crypto.TypeResponse && crypto.CookieReplyLen(len(d.b)) && len(d.b) > len(in.b) {
							t.Fatalf("reply of %d bytes to a %d-byte initiation", len(d.b), len(in.b))
						}
					}
				}
				ini.deliver(replies, resp.addr, ConnLane)
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
func forgedResponse(t *testing.T, ini *memCore) []byte {
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
	var idx uint32
	ini.locked(func() { idx = ini.peerOf0().initIndex })
	_, d, err := as.Initiate(pa, idx, crypto.LaneOffer{Ports: []uint16{1000}}, ini.clock.Now())
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

// startHandshake has ini initiate and resp answer; it returns resp's
// response, not yet delivered.
func startHandshake(t *testing.T, ini, resp *memCore) []sent {
	t.Helper()
	ini.kick(t)
	inits := ini.take()
	if len(inits) != 1 {
		t.Fatalf("%d initiations sent", len(inits))
	}
	resp.deliver(inits, ini.addr, ConnGroup)
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
	for range 50 {
		if v := ini.Unmatched(0, ConnLane, f, resp.addr, netip.Addr{}); v != shard.Ignored {
			t.Fatalf("forged response: verdict %d, want Ignored (refused or over its rate)", v)
		}
	}
	if n, l := ini.hs.refused.Load(), ini.hs.rateLimited.Load(); n != respBurst || l != 50-respBurst {
		t.Fatalf("%d forged responses read, %d rate limited; want the burst of %v read", n, l, respBurst)
	}
	if ini.hs.completed.Load() != 0 {
		t.Fatal("forgery completed the handshake")
	}
	// The bucket is empty: the genuine response waits for its refill.
	ini.deliver(genuine, resp.addr, ConnLane)
	if ini.hs.completed.Load() != 0 {
		t.Fatal("a read past the rate limit")
	}
	ini.clock.Advance(time.Second / respRate)
	ini.deliver(genuine, resp.addr, ConnLane)
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
	forged, err := resp.local.CookieReply(inits[0].b, crypto.NewCookieChecker(), ini.addr, ini.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	var next time.Time
	ini.locked(func() { next = ini.peerOf0().nextTry })
	if ini.Unmatched(0, ConnLane, forged, resp.addr, netip.Addr{}) != shard.Answered {
		t.Fatal("cookie reply not taken")
	}
	var kept, same bool
	ini.locked(func() { p := ini.peerOf0(); kept, same = p.init != nil, p.nextTry.Equal(next) })
	if !kept || !same {
		t.Fatalf("cookie reply: initiation kept %v, retry schedule kept %v", kept, same)
	}
	// No immediate retry on the next timer tick either.
	ini.Tick(ini.clock.Now())
	if n := len(ini.take()); n != 0 {
		t.Fatalf("%d initiations sent right after the cookie reply", n)
	}
	resp.deliver(inits, ini.addr, ConnGroup)
	ini.deliver(resp.take(), resp.addr, ConnLane)
	if ini.hs.completed.Load() != 1 {
		t.Fatal("genuine response after a forged cookie reply did not complete the handshake")
	}
}

// Finding 6: a datagram of cookie-reply length that matches nothing costs
// the same with 500 pending initiations as with one: pending initiations
// are found by endpoint, not by a scan.
func TestJunkCostIndependentOfPending(t *testing.T) {
	for _, n := range []int{1, 500} {
		m := newMemCore(t, "198.51.100.7:40000", 1, nil)
		var pcs []config.Peer
		for i := range n {
			k, _ := crypto.GeneratePrivateKey()
			pcs = append(pcs, config.Peer{PublicKey: k.Public(),
				Endpoint:   netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 51820),
				AllowedIPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), 32)}})
		}
		if err := m.SetPeers(pcs); err != nil {
			t.Fatal(err)
		}
		m.locked(func() {
			for _, p := range m.peers {
				m.initiate(p, m.clock.Now())
			}
		})
		m.Step()
		junk := make([]byte, 60)
		before := m.cookieScans.Load()
		const sent = 100
		for i := range sent {
			// from nowhere, and from a pending initiation's endpoint
			m.Unmatched(0, ConnLane, junk, netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), 9), netip.Addr{})
			m.Unmatched(0, ConnLane, junk, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, 0, 0}), 51820), netip.Addr{})
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
	ini.clock.Advance(HandshakeTimeout + time.Second)
	rp := resp.peerOf(t)
	resp.locked(func() { resp.initiate(rp, resp.clock.Now()) })
	resp.Step()
	ini.deliver(resp.take(), resp.addr, ConnGroup)
	resp.deliver(ini.take(), ini.addr, ConnLane)
	if ini.hs.answered.Load() != 1 || resp.hs.completed.Load() != 1 {
		t.Fatalf("answered %d, completed %d", ini.hs.answered.Load(), resp.hs.completed.Load())
	}
	if n := ini.npending.Load(); n != 0 {
		t.Fatalf("%d initiations still pending after answering", n)
	}
	ini.deliver(held, resp.addr, ConnLane)
	var iniLocal, iniRemote, respLocal, respRemote uint32
	ini.locked(func() { p := ini.peerOf0(); iniLocal, iniRemote = p.sess.LocalIndex, p.sess.RemoteIndex })
	resp.locked(func() { respLocal, respRemote = rp.sess.LocalIndex, rp.sess.RemoteIndex })
	if iniRemote != respLocal || iniLocal != respRemote {
		t.Fatal("a stale response replaced the session both sides agreed on")
	}
}

// The per-second initiation count never moves back: a shard whose clock
// reading is a moment older does not reset it (and let another
// threshold's worth of initiations cost a DH).
func TestUnderLoadSlotOnlyForward(t *testing.T) {
	r := &Core{}
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

// Initiations leave from a random lane's socket, so a hub's handshakes
// spread over its shards; the retries of one handshake keep that socket,
// because a cookie is bound to the source port it was sent to.
func TestInitiationLaneRandomRetriesKeepIt(t *testing.T) {
	ini, _ := memPair(t, "192.0.2.2:40000")
	ini.plane.lanePorts = []uint16{40000, 40001, 40002, 40003}
	var lanes []int
	ini.plane.send = func(sh, _ int, b []byte, to netip.AddrPort) error {
		lanes = append(lanes, sh)
		return nil
	}
	p := ini.peerOf(t)
	seen := map[int]bool{}
	for range 40 {
		lanes = lanes[:0]
		ini.locked(func() { p.attempts = 0 }) // a new handshake
		for range 3 {                         // its first attempt and two retries
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

// A neighbour in the real peer's /24 (a cloud neighbour, a CGNAT customer)
// that holds a cookie for its own address and sends valid-mac2 initiations
// at 60/s must not lock the peer out: a cookie proves one address, and
// proven initiations are charged to that IPv4 address alone (WireGuard
// keys its limiter the same way). With the proven bucket per /24 the peer's
// second attempt already failed.
func TestProvenNeighbourDoesNotLockOutPeer(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	neighbour := netip.MustParseAddrPort("198.51.100.99:40000")
	ak, _ := crypto.GeneratePrivateKey()
	a := crypto.NewLocal(ak, true)
	pr, err := a.AddPeer(resp.local.PublicKey(), crypto.PresharedKey{})
	if err != nil {
		t.Fatal(err)
	}
	idx := uint32(0)
	// flood sends the neighbour's initiations for one second of the fake
	// clock at 60/s, taking any cookie reply into its next initiation.
	flood := func() {
		for range 60 {
			idx++
			in, d, err := a.Initiate(pr, idx, crypto.LaneOffer{Ports: []uint16{1000}}, resp.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			resp.Unmatched(0, ConnGroup, d, neighbour, netip.Addr{})
			for _, r := range resp.take() {
				if r.to == neighbour {
					_ = in.ConsumeCookieReply(r.b, resp.clock.Now())
				}
			}
			resp.clock.Advance(time.Second / 60)
		}
	}
	flood() // the neighbour drains the /24's unproven bucket and holds a cookie
	before := resp.hs.rateLimited.Load()
	p := ini.peerOf(t)
	completed := 0
	for attempt := range 5 {
		flood()
		// The peer's attempt (a new handshake each time: its lanes went
		// silent): an initiation, a cookie reply, a retry with mac2.
		ini.PeerSilent(0, p.id, false)
		ini.Step()
		for range 3 {
			resp.deliver(ini.take(), ini.addr, ConnGroup)
			ini.deliver(resp.take(), resp.addr, ConnLane)
			if int(ini.hs.completed.Load()) > completed {
				break
			}
			ini.kick(t)
		}
		if int(ini.hs.completed.Load()) <= completed {
			t.Fatalf("attempt %d: the peer did not complete (neighbour rate limited %d times)", attempt, resp.hs.rateLimited.Load()-before)
		}
		completed = int(ini.hs.completed.Load())
		ini.clock.Advance(HandshakeTimeout + time.Millisecond)
	}
	if resp.hs.rateLimited.Load() == before {
		t.Fatal("the neighbour's flood was never rate limited: the test did not load the responder")
	}
}
