package crypto

import (
	"bytes"
	"testing"

	"golang.org/x/crypto/curve25519"
)

// forgedResponse is a response to index idx that anyone holding the
// initiator's public key (and the PSK, if there is one) can build: valid
// mac1, right receiver index, and the given 32-byte ephemeral followed by
// junk where the AEAD payload goes.
func forgedResponse(initiator PublicKey, psk PresharedKey, idx uint32, ephemeral []byte) []byte {
	wk := newWireKeysPSK(initiator, psk)
	msg := make([]byte, 32+16+4)
	copy(msg, ephemeral)
	mustRand(msg[32:])
	return sealHandshake(&wk, hsFields{typ: msgResponse, sender: 99, receiver: idx, noise: msg}, nil, nil, hsMaxLen)
}

// A forged response (low-order ephemeral, or any point with a payload that
// does not open) must leave the pending initiation able to complete with
// the genuine response.
func TestForgedResponseKeepsInitiation(t *testing.T) {
	for _, psk := range []PresharedKey{{}, {7}} {
		p := newParties(t, psk, true)
		init, d1, err := p.a.Initiate(p.pa, 11, offer(1, 5000), t0)
		if err != nil {
			t.Fatal(err)
		}
		inc, err := p.b.ConsumeInitiation(d1)
		if err != nil {
			t.Fatal(err)
		}
		d2, _, err := inc.Respond(22, offer(1, 6000))
		if err != nil {
			t.Fatal(err)
		}
		random := make([]byte, 32)
		mustRand(random)
		var forgeries [][]byte
		for _, e := range lowOrderPoints {
			forgeries = append(forgeries, forgedResponse(p.a.PublicKey(), psk, 11, e[:]))
		}
		forgeries = append(forgeries, forgedResponse(p.a.PublicKey(), psk, 11, random))
		for i, f := range forgeries {
			if typ, idx, _ := p.a.Classify(f); typ != TypeResponse || idx != 11 {
				t.Fatalf("forgery %d: classify %v %d", i, typ, idx)
			}
			if _, err := init.ConsumeResponse(f); err == nil {
				t.Fatalf("forgery %d accepted", i)
			}
		}
		if _, err := init.ConsumeResponse(d2); err != nil {
			t.Fatalf("genuine response after forgeries: %v", err)
		}
	}
}

// Every listed point really is of low order (X25519 refuses it), and the
// check costs no scalar multiplication.
func TestLowOrderPoints(t *testing.T) {
	priv, _ := GeneratePrivateKey()
	for i, e := range lowOrderPoints {
		if _, err := curve25519.X25519(priv[:], e[:]); err == nil {
			t.Errorf("point %d (%x) is not of low order", i, e)
		}
		if !isLowOrder(e[:]) {
			t.Errorf("point %d not recognised", i)
		}
	}
	pub := priv.Public()
	if isLowOrder(pub[:]) || isLowOrder(bytes.Repeat([]byte{0x42}, 32)) {
		t.Error("ordinary points taken for low order")
	}
}
