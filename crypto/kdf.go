package crypto

import (
	"encoding/binary"
	"hash"
	"io"

	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/hkdf"
)

// Domain-separation labels. Changing any of them changes the wire format.
const (
	labelLane   = "yip-router v1 lane keys"
	labelMac1   = "yip-router v1 mac1"
	labelMask   = "yip-router v1 handshake mask"
	labelCookie = "yip-router v1 cookie reply"
	// The same keys for a pair of routers that share a PSK (pskKey).
	labelPSKMac1   = "yip-router v1 psk mac1"
	labelPSKMask   = "yip-router v1 psk handshake mask"
	labelPSKCookie = "yip-router v1 psk cookie reply"
	noisePrologue  = "yip-router v1"
)

func newBlake2s() hash.Hash {
	h, _ := blake2s.New256(nil) // cannot fail without a key
	return h
}

// hkdfExpand fills out with HKDF-BLAKE2s(secret, info). Not on the per-packet
// path: it runs once per lane per handshake.
func hkdfExpand(out, secret []byte, info string, lane uint16) {
	var inf []byte
	inf = append(inf, info...)
	inf = binary.BigEndian.AppendUint16(inf, lane)
	r := hkdf.New(newBlake2s, secret, nil, inf)
	if _, err := io.ReadFull(r, out); err != nil {
		panic("crypto: hkdf expand: " + err.Error()) // only for len(out) > 255*32
	}
}

// labelledKey is BLAKE2s-256(label ‖ pub): the public-key-bound keys of the
// handshake obfuscation (mac1, mask, cookie-reply). They need no secret: their
// job is to make the bytes look random to anyone who does not know the
// receiver's public key, and to reject non-handshakes before any DH.
func labelledKey(label string, pub PublicKey) [32]byte {
	h := newBlake2s()
	h.Write([]byte(label))
	h.Write(pub[:])
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// pskKey is BLAKE2s-256(key = psk, label ‖ pub): the handshake obfuscation
// keys of a receiver whose peer shares a PSK with it. Without the PSK they
// cannot be computed, so holding the receiver's public key (it is in every
// peer's config) is not enough to recognise, forge or answer a handshake.
func pskKey(label string, pub PublicKey, psk PresharedKey) [32]byte {
	h, err := blake2s.New256(psk[:])
	if err != nil {
		panic("crypto: blake2s: " + err.Error()) // the key length is fixed
	}
	h.Write([]byte(label))
	h.Write(pub[:])
	var k [32]byte
	h.Sum(k[:0])
	return k
}
