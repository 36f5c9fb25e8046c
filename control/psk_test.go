package control

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/testclock"
)

// The responder stays silent to probes: what docs/SECURITY.md's threat
// table claims, checked through Unmatched with the router unloaded and
// under load (cookies demanded).

var testPSK = crypto.PresharedKey{0x5e, 0xc2, 0xe7}

// memPairPSK is memPair with a PSK on both sides, and LegacyMAC as given.
func memPairPSK(t testing.TB, iniLegacy, respLegacy bool) (ini, resp *memCore) {
	t.Helper()
	clock := testclock.New(epoch)
	ini = newMemCore(t, "198.51.100.7:40000", 1, clock)
	resp = newMemCore(t, "192.0.2.1:51820", 1, clock)
	if err := ini.SetPeers([]config.Peer{{PublicKey: resp.local.PublicKey(), PresharedKey: testPSK,
		LegacyMAC: iniLegacy, Endpoint: resp.addr,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.2/32")}}}); err != nil {
		t.Fatal(err)
	}
	if err := resp.SetPeers([]config.Peer{{PublicKey: ini.local.PublicKey(), PresharedKey: testPSK,
		LegacyMAC: respLegacy, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}}}); err != nil {
		t.Fatal(err)
	}
	return ini, resp
}

// setLoaded puts m under load (every initiation needs a cookie) or not.
func (m *memCore) setLoaded(loaded bool) {
	var n uint64
	if loaded {
		n = 1 << 30
	}
	m.inits.set(m.clock.Now(), n)
}

// silent delivers each probe to resp from a fresh source, unloaded and
// under load, and fails if resp sent anything back. resp forgets the
// initiations it saw before each, so that the replay filter does not hide
// what the other checks do.
func silent(t *testing.T, resp *memCore, what string, probes ...[]byte) {
	t.Helper()
	for _, loaded := range []bool{false, true} {
		for i, d := range probes {
			resp.seenInits = crypto.InitiationFilter{}
			resp.setLoaded(loaded)
			from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), uint16(2000+i))
			resp.Unmatched(0, ConnGroup, bytes.Clone(d), from, netip.Addr{})
			if out := resp.take(); len(out) != 0 {
				t.Fatalf("%s %d (loaded %v): responder sent %d datagrams", what, i, loaded, len(out))
			}
		}
	}
}

// PSK peers complete handshakes, directly and through the cookie path, with
// PSK-keyed handshakes and with LegacyMAC on both sides.
func TestPSKHandshakes(t *testing.T) {
	for _, c := range []struct {
		name                  string
		iniLegacy, respLegacy bool
	}{{"new", false, false}, {"legacy both", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			ini, resp := memPairPSK(t, c.iniLegacy, c.respLegacy)
			handshake(t, ini, resp)

			// Under load: a cookie reply the initiator opens, then mac2.
			ini, resp = memPairPSK(t, c.iniLegacy, c.respLegacy)
			resp.setLoaded(true)
			cookiesBefore, answeredBefore := resp.hs.cookies.Load(), resp.hs.answered.Load()
			for range 4 {
				ini.kick(t)
				resp.deliver(ini.take(), ini.addr, ConnGroup)
				ini.deliver(resp.take(), resp.addr, ConnLane)
				resp.setLoaded(true)
				if resp.hs.answered.Load() > answeredBefore {
					break
				}
			}
			if resp.hs.cookies.Load() == cookiesBefore || resp.hs.answered.Load() == answeredBefore {
				t.Fatalf("cookie path: %d cookie replies, %d answered", resp.hs.cookies.Load()-cookiesBefore,
					resp.hs.answered.Load()-answeredBefore)
			}
		})
	}
}

// A router whose peers all have PSKs does not answer anyone holding only its
// public key, nor a peer's static key without the PSK, nor another PSK,
// unloaded or under load; it is the same router that answers such a probe
// with a cookie reply under load once a peer without a PSK is configured.
func TestPSKRouterSilentToPublicKeyHolder(t *testing.T) {
	ini, resp := memPairPSK(t, false, false)
	pubOnly := attackerInitiations(t, resp, 4)
	silent(t, resp, "public-key-only initiation", pubOnly...)

	// The peer's own static key, without the PSK.
	thief := crypto.NewLocal(ini.priv, true)
	tp, err := thief.AddPeer(resp.local.PublicKey(), crypto.PresharedKey{})
	if err != nil {
		t.Fatal(err)
	}
	_, stolen, err := thief.Initiate(tp, 1, crypto.LaneOffer{Ports: []uint16{1000}}, resp.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	silent(t, resp, "peer's key without the PSK", stolen)
	silent(t, resp, "initiation under another PSK", keyedInitiations(t, resp, crypto.PresharedKey{1}, 2)...)
	if resp.peerOf(t).sess != nil {
		t.Fatal("a probe made a session")
	}

	// With a peer that has no PSK, the public-key-only form is a
	// handshake again: the same kind of probe draws a cookie reply under
	// load (what the silence above is compared with).
	other, _ := crypto.GeneratePrivateKey()
	if err := resp.SetPeers([]config.Peer{
		{PublicKey: ini.local.PublicKey(), PresharedKey: testPSK, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}},
		{PublicKey: other.Public(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.3/32")}},
	}); err != nil {
		t.Fatal(err)
	}
	resp.setLoaded(true)
	resp.Unmatched(0, ConnGroup, attackerInitiation(t, resp), netip.MustParseAddrPort("203.0.113.99:9"), netip.Addr{})
	if out := resp.take(); len(out) != 1 {
		t.Fatalf("public-key-only probe with a PSK-less peer configured: %d replies, want a cookie reply", len(out))
	}
	// Still: the PSK peer's static key in the public-key-only form is
	// refused (mac1 matched, the peer uses its PSK's keys), unloaded.
	_, stolen, _ = thief.Initiate(tp, 2, crypto.LaneOffer{Ports: []uint16{1000}}, resp.clock.Now())
	refused := resp.hs.refused.Load()
	resp.setLoaded(false)
	resp.Unmatched(0, ConnGroup, stolen, netip.MustParseAddrPort("203.0.113.98:9"), netip.Addr{})
	if out := resp.take(); len(out) != 0 || resp.hs.refused.Load() != refused+1 {
		t.Fatalf("PSK peer's key in the public-key-only form: %d replies, refused +%d", len(out), resp.hs.refused.Load()-refused)
	}
}

// A genuine initiation's replays, truncations and extensions get no answer,
// unloaded or under load, and do not use it up: delivered afterwards, the
// genuine one is answered.
func TestProbesOfGenuineInitiation(t *testing.T) {
	ini, resp := memPairPSK(t, false, false)
	ini.kick(t)
	var init []byte
	for _, d := range ini.take() {
		if d.to == resp.addr {
			init = d.b
		}
	}
	if init == nil {
		t.Fatal("no initiation sent")
	}
	var probes [][]byte
	probes = append(probes, init[:len(init)-1], init[1:], append(bytes.Clone(init), 0),
		append([]byte{0}, init...), init[:len(init)-16])
	for _, pos := range []int{0, len(init) / 2, len(init) - 32, len(init) - 17} {
		b := bytes.Clone(init)
		b[pos] ^= 1
		probes = append(probes, b)
	}
	silent(t, resp, "altered initiation", probes...)

	// The genuine one, from the initiator's address: answered.
	resp.setLoaded(false)
	resp.Unmatched(0, ConnGroup, init, ini.addr, netip.Addr{})
	if out := resp.take(); len(out) != 1 {
		t.Fatalf("genuine initiation: %d replies", len(out))
	}
	// Its replays, from anywhere (the initiator's address too), unloaded
	// and under load: silence.
	for i, loaded := range []bool{false, true, false, true} {
		from := ini.addr
		if i >= 2 {
			from = netip.MustParseAddrPort("203.0.113.50:7")
		}
		resp.setLoaded(loaded)
		resp.Unmatched(0, ConnGroup, init, from, netip.Addr{})
		if out := resp.take(); len(out) != 0 {
			t.Fatalf("replay from %v (loaded %v): %d replies", from, loaded, len(out))
		}
	}
}

// A holder of the PSK (and the public key) but of no peer's static key can
// build initiations the router recognises: unloaded they are refused after
// the DH (silence), under load they draw a cookie reply. The threat table
// says so; this keeps it true.
func TestPSKHolderGetsCookieReplyUnderLoad(t *testing.T) {
	_, resp := memPairPSK(t, false, false)
	d := keyedInitiations(t, resp, testPSK, 2)
	resp.setLoaded(false)
	resp.Unmatched(0, ConnGroup, d[0], netip.MustParseAddrPort("203.0.113.1:9"), netip.Addr{})
	if out := resp.take(); len(out) != 0 {
		t.Fatalf("unknown static key with the PSK, unloaded: %d replies", len(out))
	}
	resp.setLoaded(true)
	resp.Unmatched(0, ConnGroup, d[1], netip.MustParseAddrPort("203.0.113.2:9"), netip.Addr{})
	if out := resp.take(); len(out) != 1 || !crypto.CookieReplyLen(len(out[0].b)) {
		t.Fatalf("unknown static key with the PSK, under load: %d replies, want a cookie reply", len(out))
	}
}

// LegacyMAC must agree: with it on one side only, the responder cannot
// recognise the initiations (silence, no session); a reload that makes the
// ends agree lets the next attempt complete, and changing LegacyMAC alone
// keeps a session.
func TestLegacyMACMustAgree(t *testing.T) {
	for _, iniLegacy := range []bool{false, true} {
		ini, resp := memPairPSK(t, iniLegacy, !iniLegacy)
		ini.kick(t)
		resp.deliver(ini.take(), ini.addr, ConnGroup)
		if out := resp.take(); len(out) != 0 || resp.peerOf(t).sess != nil {
			t.Fatalf("LegacyMAC %v/%v: responder sent %d datagrams", iniLegacy, !iniLegacy, len(out))
		}
		if err := resp.SetPeers([]config.Peer{{PublicKey: ini.local.PublicKey(), PresharedKey: testPSK,
			LegacyMAC: iniLegacy, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}}}); err != nil {
			t.Fatal(err)
		}
		handshake(t, ini, resp)
		// Both flip back: the session stays.
		if err := resp.SetPeers([]config.Peer{{PublicKey: ini.local.PublicKey(), PresharedKey: testPSK,
			LegacyMAC: !iniLegacy, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}}}); err != nil {
			t.Fatal(err)
		}
		if resp.peerOf(t).sess == nil {
			t.Fatal("changing LegacyMAC dropped the session")
		}
	}
}
