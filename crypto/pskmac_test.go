package crypto

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

// With a PSK, the handshake is masked and MACed under keys that need the
// PSK: a holder of the responder's public key alone (who can build the
// public-key-only form) is not recognised, and a router without the PSK
// cannot even tell a PSK-keyed initiation is a handshake.
func TestPSKKeysHandshake(t *testing.T) {
	psk := PresharedKey{9, 9, 9}
	p := newParties(t, psk, true)
	_, d1, _ := p.a.Initiate(p.pa, 1, offer(1, 1), t0)
	if checkMac1(&p.b.wk, d1) {
		t.Fatal("a PSK peer's initiation has a valid public-key-only mac1")
	}
	pubOnly := NewLocal(p.b.priv, true) // b's identity, peer a without the PSK
	if _, err := pubOnly.AddPeer(p.a.PublicKey(), PresharedKey{}); err != nil {
		t.Fatal(err)
	}
	if typ, _, _ := pubOnly.Classify(d1); typ != NotHandshake {
		t.Fatal("recognised a PSK-keyed initiation without the PSK")
	}

	// The prober: holds b's public key, builds the public-key-only form.
	kx, _ := GeneratePrivateKey()
	x := NewLocal(kx, true)
	px, _ := x.AddPeer(p.b.PublicKey(), PresharedKey{})
	_, probe, _ := x.Initiate(px, 1, offer(1, 1), t0)
	if typ, _, _ := p.b.Classify(probe); typ != NotHandshake {
		t.Fatal("public-key-only probe classified by a router whose peers all have PSKs")
	}
	if _, err := p.b.CookieReply(probe, NewCookieChecker(), netip.MustParseAddrPort("192.0.2.9:1"), t0); !errors.Is(err, ErrMac1) {
		t.Fatalf("cookie reply to a public-key-only probe: %v", err)
	}
	if n := p.b.HandshakeKeys(); n != 1 {
		t.Fatalf("%d handshake keys, want 1 (the PSK's)", n)
	}

	// The genuine initiation: cookie reply under the PSK-keyed cookie key,
	// which the initiator opens and a public-key-only one does not.
	in, d1, _ := p.a.Initiate(p.pa, 2, offer(1, 1), t0)
	reply, err := p.b.CookieReply(d1, NewCookieChecker(), netip.MustParseAddrPort("192.0.2.9:1"), t0)
	if err != nil {
		t.Fatal(err)
	}
	pk := newWireKeys(p.b.PublicKey())
	if _, err := openCookieReply(&pk.cookie, reply, mac1Of(d1)); err == nil {
		t.Fatal("cookie reply to a PSK peer opens under the public-key-only key")
	}
	if err := in.ConsumeCookieReply(reply, t0); err != nil {
		t.Fatal(err)
	}
	// And the whole handshake: the response is keyed by the PSK too.
	handshake(t, p, t0.Add(time.Minute))
}

// An initiation whose mac1 matches one PSK's key but whose Noise static key
// is a peer with another PSK is refused before it moves that peer's
// timestamp or draws a response; a peer with a PSK cannot use the
// public-key-only form either (it is accepted only because another peer has
// no PSK).
func TestInitiationKeyedForAnotherPeer(t *testing.T) {
	k1, k2, kb := mustKey(t), mustKey(t), mustKey(t)
	b := NewLocal(kb, true)
	x, y := PresharedKey{1}, PresharedKey{2}
	if _, err := b.AddPeer(k1.Public(), x); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddPeer(k2.Public(), y); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddPeer(mustKey(t).Public(), PresharedKey{}); err != nil {
		t.Fatal(err)
	}
	if n := b.HandshakeKeys(); n != 3 {
		t.Fatalf("%d handshake keys, want 3", n)
	}
	// Peer 1 (PSK x) sends an initiation masked under y's keys, and one
	// in the public-key-only form.
	a1 := NewLocal(k1, true)
	asX, _ := a1.AddPeer(kb.Public(), x)
	forger := NewLocal(k1, true) // peer 1's static key, other wire keys
	wrong, _ := forger.AddPeer(kb.Public(), x)
	wy := newWireKeysPSK(kb.Public(), y)
	wrong.wk = &wy
	_, dY, _ := forger.Initiate(wrong, 1, offer(1, 1), t0)
	pub := newWireKeys(kb.Public())
	wrong.wk = &pub
	_, dPub, _ := forger.Initiate(wrong, 2, offer(1, 1), t0)
	for name, d := range map[string][]byte{"other PSK": dY, "public key only": dPub} {
		if typ, _, _ := b.Classify(d); typ != TypeInitiation {
			t.Fatalf("%s: mac1 should match one of b's keys", name)
		}
		if _, err := b.ConsumeInitiation(d); !errors.Is(err, ErrWrongKeys) {
			t.Fatalf("%s: %v, want ErrWrongKeys", name, err)
		}
	}
	// The timestamp did not move: a genuine initiation from t0 is fresh.
	_, d, _ := a1.Initiate(asX, 3, offer(1, 1), t0)
	if _, err := b.ConsumeInitiation(d); err != nil {
		t.Fatalf("genuine initiation after the refused ones: %v", err)
	}
}

// LegacyMAC: routers that predate PSK-keyed handshakes send and answer the
// public-key-only form. A peer configured with it gets that form from us
// and must use it; without it, the public-key-only form of a PSK peer is
// refused, and a PSK-keyed initiation to a router that has the initiator
// as legacy is not even recognised.
func TestLegacyMAC(t *testing.T) {
	psk := PresharedKey{5}
	ka, kb := mustKey(t), mustKey(t)
	mk := func(priv PrivateKey, peer PublicKey, legacy bool) (*Local, *Peer) {
		l := NewLocal(priv, true)
		p, err := l.AddPeerLegacy(peer, psk, legacy)
		if err != nil {
			t.Fatal(err)
		}
		return l, p
	}
	for _, c := range []struct {
		name         string
		aLegacy      bool // initiator
		bLegacy      bool // responder
		completes    bool
		publicKeyMAC bool // the initiation is in the public-key-only form
	}{
		{"both new", false, false, true, false},
		{"both legacy", true, true, true, true},
		{"new to legacy", false, true, false, false},
		{"legacy to new", true, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, pa := mk(ka, kb.Public(), c.aLegacy)
			b, _ := mk(kb, ka.Public(), c.bLegacy)
			in, d1, _ := a.Initiate(pa, 1, offer(1, 1), t0)
			pub := newWireKeys(b.PublicKey())
			if checkMac1(&pub, d1) != c.publicKeyMAC {
				t.Fatalf("public-key-only form: %v, want %v", !c.publicKeyMAC, c.publicKeyMAC)
			}
			inc, err := b.ConsumeInitiation(d1)
			if !c.completes {
				if !errors.Is(err, ErrMac1) {
					t.Fatalf("refused initiation: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d2, _, err := inc.Respond(2, offer(1, 1))
			if err != nil {
				t.Fatal(err)
			}
			// Answered in the form it came in.
			apub := newWireKeys(a.PublicKey())
			if checkMac1(&apub, d2) != c.publicKeyMAC {
				t.Fatal("response not in the initiation's form")
			}
			if _, err := in.ConsumeResponse(d2); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Replacing and removing peers keeps the key set to the keys still in use.
func TestHandshakeKeySet(t *testing.T) {
	b := NewLocal(mustKey(t), true)
	if b.HandshakeKeys() != 0 {
		t.Fatal("keys with no peers")
	}
	k1, k2 := mustKey(t).Public(), mustKey(t).Public()
	steps := []struct {
		do   func()
		want int
	}{
		{func() { _, _ = b.AddPeer(k1, PresharedKey{1}) }, 1},
		{func() { _, _ = b.AddPeer(k2, PresharedKey{1}) }, 1},
		{func() { _, _ = b.AddPeer(k2, PresharedKey{}) }, 2},
		{func() { _, _ = b.AddPeerLegacy(k1, PresharedKey{3}, true) }, 1}, // {}
		{func() { _, _ = b.AddPeer(k2, PresharedKey{4}) }, 2},             // {}, {4}
		{func() { _, _ = b.AddPeerLegacy(k2, PresharedKey{4}, true) }, 1}, // {}
		{func() { _, _ = b.AddPeer(k2, PresharedKey{4}) }, 2},             // {}, {4}
		{func() { b.RemovePeer(k1) }, 1},
		{func() { b.RemovePeer(k2) }, 0},
	}
	for i, s := range steps {
		s.do()
		if n := b.HandshakeKeys(); n != s.want {
			t.Fatalf("step %d: %d keys, want %d", i, n, s.want)
		}
	}
	// Replacing the only peer of a key (a reload) keeps the key: its
	// pooled BLAKE2s states, and initiations pending under it, stay.
	_, _ = b.AddPeer(k1, PresharedKey{6})
	wk := b.rx[PresharedKey{6}].wk
	_, _ = b.AddPeer(k1, PresharedKey{6})
	if b.rx[PresharedKey{6}].wk != wk || b.rx[PresharedKey{6}].refs != 1 {
		t.Fatal("re-adding a peer rebuilt its handshake key")
	}
}

// The mac1 check of garbage allocates nothing, whatever the number of keys.
func TestMatchNoAllocation(t *testing.T) {
	if raceEnabled {
		// sync.Pool drops a quarter of the states put back under -race.
		t.Skip("allocation test: run without -race")
	}
	b := NewLocal(mustKey(t), true)
	for i := range 5 {
		if _, err := b.AddPeer(mustKey(t).Public(), PresharedKey{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	junk := make([]byte, 200)
	b.IsHandshake(junk)
	if a := testing.AllocsPerRun(100, func() { b.Classify(junk) }); a != 0 {
		t.Fatalf("%.1f allocations per garbage datagram", a)
	}
}

func mustKey(t *testing.T) PrivateKey {
	t.Helper()
	k, err := GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The initiation filter knows a repeat, and not a fresh initiation.
func TestInitiationFilter(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	var f InitiationFilter
	for i := range 100 {
		_, d, _ := p.a.Initiate(p.pa, uint32(i), offer(1, 1), t0)
		if f.Seen(d) {
			t.Fatalf("fresh initiation %d taken for a replay", i)
		}
		if !f.Seen(d) {
			t.Fatalf("repeat of initiation %d not seen", i)
		}
	}
	short := make([]byte, 10)
	f.Seen(short)
	if f.Seen(short) {
		t.Fatal("a datagram too short for a mac1 was seen")
	}
}

// Mac1Covered is what a mac1 check hashes: all of a datagram of handshake
// length but its two MACs, nothing of one of any other length (the
// shards price junk by it).
func TestMac1Covered(t *testing.T) {
	for n, want := range map[int]int{
		0: 0, hsMinLen - 1: 0, hsMinLen: hsMinLen - 2*hsMacLen,
		1024: 1024 - 2*hsMacLen, hsMaxLen: hsMaxLen - 2*hsMacLen, hsMaxLen + 1: 0, 65507: 0,
	} {
		if got := Mac1Covered(n); got != want {
			t.Errorf("Mac1Covered(%d) = %d, want %d", n, got, want)
		}
	}
}
