package crypto

// Tests of the DH caches (dh.go): the ss cache saves a scalar
// multiplication, Prepare fills it for many peers, and an ephemeral's
// cached key is wiped once the handshake has used it twice.

import "testing"

// The ss cache takes one scalar multiplication off consuming an initiation.
func TestSSCacheSavesOneDH(t *testing.T) {
	for _, tc := range []struct {
		cache bool
		want  uint64
	}{{true, 1}, {false, 2}} {
		p := newParties(t, PresharedKey{}, tc.cache)
		_, d1, _ := p.a.Initiate(p.pa, 1, offer(1, 1), t0)
		before := p.b.scalarMults()
		if _, err := p.b.ConsumeInitiation(d1); err != nil {
			t.Fatal(err)
		}
		if got := p.b.scalarMults() - before; got != tc.want {
			t.Fatalf("cache=%v: %d scalar mults to consume an initiation, want %d", tc.cache, got, tc.want)
		}
	}
}

// Prepare computes the ss of many peers up front: AddPeer then costs no
// scalar multiplication, and handshakes with them still complete.
func TestPrepareFillsSSCache(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	var keys []PrivateKey
	var pubs []PublicKey
	for range 100 {
		k, err := GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		pubs = append(pubs, k.Public())
	}
	p.b.Prepare(pubs)
	before := p.b.scalarMults()
	if before < 100 {
		t.Fatalf("Prepare made %d scalar multiplications for 100 keys", before)
	}
	for _, pub := range pubs {
		if _, err := p.b.AddPeer(pub, PresharedKey{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.b.scalarMults() - before; got != 0 {
		t.Fatalf("AddPeer after Prepare made %d scalar multiplications, want 0", got)
	}
	a := NewLocal(keys[42], true)
	pb, err := a.AddPeer(p.b.PublicKey(), PresharedKey{})
	if err != nil {
		t.Fatal(err)
	}
	_, d, err := a.Initiate(pb, 1, offer(1, 1), t0)
	if err != nil {
		t.Fatal(err)
	}
	in, err := p.b.ConsumeInitiation(d)
	if err != nil || in.Peer().PublicKey() != pubs[42] {
		t.Fatalf("initiation from a prepared peer: %v", err)
	}
}

// An ephemeral's cached ecdh key is wiped after the handshake's second use
// of it, and the handshake still completes.
func TestEphemeralCacheWipedAfterUse(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	in, d1, err := p.a.Initiate(p.pa, 1, offer(1, 1), t0)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := p.b.ConsumeInitiation(d1)
	if err != nil {
		t.Fatal(err)
	}
	d2, _, err := inc.Respond(2, offer(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Local{p.a, p.b} {
		for i := range l.dh.eph.keys {
			if l.dh.eph.keys[i] != nil && l.dh.eph.uses[i] >= 2 {
				t.Fatal("an ephemeral used twice is still cached")
			}
		}
	}
	if _, err := in.ConsumeResponse(d2); err != nil {
		t.Fatal(err)
	}
	for i := range p.a.dh.eph.keys {
		if p.a.dh.eph.keys[i] != nil {
			t.Fatal("the initiator's ephemeral is still cached after the response")
		}
	}
	for i := range p.b.dh.eph.keys {
		if p.b.dh.eph.keys[i] != nil {
			t.Fatal("the responder's ephemeral is still cached after its response")
		}
	}
}
