package crypto

import (
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"hash"
	"sync"

	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/chacha20poly1305"
)

// Handshake datagram (initiation and response share it):
//
//	seed (24) ‖ masked inner ‖ mac1 (16) ‖ mac2 (16)
//	inner = type (1) ‖ sender index (4) ‖ receiver index (4) ‖
//	        noise length (2) ‖ noise message ‖ random padding
//
// The inner part is XORed with XChaCha20(key = BLAKE2s(label ‖ receiver's
// public key), nonce = seed), so without the receiver's public key every
// byte, including the type, is random; the random padding gives the
// datagram a length drawn from data-datagram lengths (wirelen.go). mac1 is
// BLAKE2s-128 keyed by the receiver's public key over everything before it:
// the receiver checks it before unmasking or doing any DH, so stray
// datagrams and scans cost one BLAKE2s per key it accepts (Local.keySet).
// When the two routers share a PSK, the mask, mac1 and cookie-reply keys
// are keyed by the PSK too (pskKey: BLAKE2s keyed with the PSK over label ‖
// receiver's public key), so the public key alone no longer recognises or
// forges a handshake. mac2 is BLAKE2s-128
// keyed by a cookie over everything before it, or random bytes when the
// sender holds no cookie (WireGuard sends zeros there; zeros would be a fixed
// pattern).
const (
	hsSeedLen  = 24
	hsMacLen   = 16
	hsInnerHdr = 11
	hsTrailer  = 2 * hsMacLen
	hsMinLen   = hsSeedLen + hsInnerHdr + 32 + hsTrailer
	// hsLegacyMax is the longest handshake datagram routers before long
	// handshakes accept (those from before drawn lengths, which padded
	// by a uniform 0..96 bytes, too): the cap of an initiation's length
	// unless its receiver is known to take more (LongHandshakes).
	hsLegacyMax = 1024
	// hsMaxLen is the longest handshake datagram a receiver accepts: a
	// full-sized data datagram (MTU up to 1576 + 42 bytes of framing +
	// 32 of padding) fits, so a handshake can take any length data
	// takes. A response or cookie reply is never longer than the
	// initiation it answers, so an initiator that sent no more than
	// hsLegacyMax is never sent more.
	hsMaxLen    = 1664
	msgInit     = 1
	msgResponse = 2
	// initLongCookies, in the receiver-index field of an initiation
	// (unused by an initiation, random from routers before it), says the
	// initiator accepts cookie replies up to hsMaxLen; without it a cookie
	// reply stays within the cookieOldMax those routers accept. The field
	// is masked like the rest, so on the wire it is random either way.
	initLongCookies uint32 = 0x79697032
)

var (
	// ErrMac1 means a datagram is not a handshake addressed to us.
	ErrMac1 = errors.New("crypto: not a handshake for this key (mac1)")
	// ErrHandshake means an authenticated-looking handshake is malformed.
	ErrHandshake = errors.New("crypto: malformed handshake message")
)

// wireKeys are the handshake obfuscation keys of one receiver: bound to its
// public key, and to a PSK when psk is not zero.
type wireKeys struct {
	psk    PresharedKey // zero: the public-key-only form
	mac1   [32]byte
	mask   [32]byte
	cookie [32]byte // encrypts cookie replies this key's owner sends
	// cookieAEAD is XChaCha20-Poly1305 under cookie, made once: it is safe
	// for concurrent use, and a flood makes the router seal a reply per
	// initiation.
	cookieAEAD cipher.AEAD
	// mac1Hashes are BLAKE2s-128 states keyed with mac1, reused: every
	// datagram of handshake length that matches no lane gets its mac1
	// checked, and a fresh keyed state per check was the one allocation
	// a garbage flood caused.
	mac1Hashes *sync.Pool
}

// newWireKeys returns the public-key-only keys of the receiver pub: the
// form used between routers that share no PSK.
func newWireKeys(pub PublicKey) wireKeys {
	return makeWireKeys(wireKeys{
		mac1:   labelledKey(labelMac1, pub),
		mask:   labelledKey(labelMask, pub),
		cookie: labelledKey(labelCookie, pub),
	})
}

// newWireKeysPSK returns the keys of the receiver pub for handshakes with a
// peer that shares psk with it; a zero psk gives the public-key-only form.
func newWireKeysPSK(pub PublicKey, psk PresharedKey) wireKeys {
	if psk.IsZero() {
		return newWireKeys(pub)
	}
	return makeWireKeys(wireKeys{
		psk:    psk,
		mac1:   pskKey(labelPSKMac1, pub, psk),
		mask:   pskKey(labelPSKMask, pub, psk),
		cookie: pskKey(labelPSKCookie, pub, psk),
	})
}

func makeWireKeys(wk wireKeys) wireKeys {
	a, err := chacha20poly1305.NewX(wk.cookie[:])
	if err != nil {
		panic("crypto: xchacha20poly1305: " + err.Error()) // the key length is fixed
	}
	wk.cookieAEAD = a
	key := wk.mac1
	wk.mac1Hashes = &sync.Pool{New: func() any {
		h, err := blake2s.New128(key[:])
		if err != nil {
			panic("crypto: blake2s: " + err.Error())
		}
		return &macState{h: h}
	}}
	return wk
}

// macState is a keyed hash and room for its sum (a sum written into a
// caller's stack array through the interface would escape to the heap).
type macState struct {
	h   hash.Hash
	sum [hsMacLen]byte
}

// macWith computes a MAC with a keyed state from pool.
func macWith(dst []byte, pool *sync.Pool, msg []byte) {
	st := pool.Get().(*macState)
	st.h.Reset()
	st.h.Write(msg)
	copy(dst, st.h.Sum(st.sum[:0]))
	pool.Put(st)
}

// hsFields is the parsed inner part of a handshake datagram.
type hsFields struct {
	typ      byte
	sender   uint32
	receiver uint32
	noise    []byte
}

// randUint is a uniform random int in [0, max) for padding lengths. 64
// random bits reduced modulo max (at most a few hundred): the bias is below
// 2^-55, and it costs no big.Int (it runs for every cookie reply a flood
// makes the router send).
func randUint(max int) int {
	var b [8]byte
	mustRand(b[:])
	return int(binary.LittleEndian.Uint64(b[:]) % uint64(max))
}

func mustRand(b []byte) {
	if _, err := rand.Read(b); err != nil {
		panic("crypto: rand: " + err.Error())
	}
}

// sealHandshake builds a handshake datagram for the receiver whose keys are
// wk. cookie, if non-nil, keys mac2. Its length is drawn from lens (nil: the
// built-in distribution) among the lengths it can take, from its unpadded
// length to maxLen (at most hsMaxLen). It randomises the unused top bit of
// the Noise ephemeral key (first 32 bytes of f.noise), which X25519 ignores
// and the receiver clears, so that bit is not always zero.
func sealHandshake(wk *wireKeys, f hsFields, cookie *[16]byte, lens WireLengths, maxLen int) []byte {
	bare := hsSeedLen + hsInnerHdr + len(f.noise) + hsTrailer
	n := drawLen(lens, bare, min(maxLen, hsMaxLen))
	inner := n - hsSeedLen - hsTrailer
	out := make([]byte, n)
	mustRand(out[:hsSeedLen])
	in := out[hsSeedLen : hsSeedLen+inner]
	in[0] = f.typ
	binary.BigEndian.PutUint32(in[1:5], f.sender)
	binary.BigEndian.PutUint32(in[5:9], f.receiver)
	binary.BigEndian.PutUint16(in[9:11], uint16(len(f.noise)))
	copy(in[hsInnerHdr:], f.noise)
	var topbit [1]byte
	mustRand(topbit[:])
	in[hsInnerHdr+31] |= topbit[0] & 0x80
	mustRand(in[hsInnerHdr+len(f.noise):])
	xorMask(wk, out[:hsSeedLen], in)
	m1 := out[hsSeedLen+inner : hsSeedLen+inner+hsMacLen]
	macWith(m1, wk.mac1Hashes, out[:hsSeedLen+inner])
	m2 := out[hsSeedLen+inner+hsMacLen:]
	if cookie != nil {
		mac(m2, cookie[:], out[:hsSeedLen+inner+hsMacLen])
	} else {
		mustRand(m2)
	}
	return out
}

func xorMask(wk *wireKeys, seed, b []byte) {
	c, err := chacha20.NewUnauthenticatedCipher(wk.mask[:], seed)
	if err != nil {
		panic("crypto: xchacha20: " + err.Error())
	}
	c.XORKeyStream(b, b)
}

func mac(dst, key, msg []byte) {
	h, err := blake2s.New128(key)
	if err != nil {
		panic("crypto: blake2s: " + err.Error())
	}
	h.Write(msg)
	var sum [hsMacLen]byte
	copy(dst, h.Sum(sum[:0]))
}

// Mac1Covered is how many bytes a mac1 check hashes in a datagram of n
// bytes: none unless n is a handshake length, so it is also the one
// length test every handshake reader applies. A shard prices the junk it
// reads by it (shard.Config.HandshakeKeys checks each).
func Mac1Covered(n int) int {
	if n < hsMinLen || n > hsMaxLen {
		return 0
	}
	return n - hsTrailer
}

// checkMac1 is the cheap gate: true iff dgram has a plausible handshake
// length and a valid mac1 for the receiver keys wk.
func checkMac1(wk *wireKeys, dgram []byte) bool {
	end := Mac1Covered(len(dgram))
	if end == 0 {
		return false
	}
	var want [hsMacLen]byte
	macWith(want[:], wk.mac1Hashes, dgram[:end])
	return subtle.ConstantTimeCompare(want[:], dgram[end:end+hsMacLen]) == 1
}

// mac1Of returns the mac1 field of a handshake datagram of valid length.
func mac1Of(dgram []byte) []byte {
	end := len(dgram) - hsTrailer
	return dgram[end : end+hsMacLen]
}

// checkMac2 verifies mac2 under cookie.
func checkMac2(cookie *[16]byte, dgram []byte) bool {
	end := len(dgram) - hsMacLen
	var want [hsMacLen]byte
	mac(want[:], cookie[:], dgram[:end])
	return subtle.ConstantTimeCompare(want[:], dgram[end:]) == 1
}

// LongHandshakes is what a WireLengths may also say: that the receiver of
// the handshakes drawn from it takes datagrams up to hsMaxLen (it said so in
// an earlier session), so initiations may be as long as data datagrams.
type LongHandshakes interface {
	LongHandshakes() bool
}

// initMaxLen is the cap of an initiation's length drawn from lens.
func initMaxLen(lens WireLengths) int {
	if l, ok := lens.(LongHandshakes); ok && l.LongHandshakes() {
		return hsMaxLen
	}
	return hsLegacyMax
}

// longCookies reports whether the initiation dgram (mac1 checked, so of
// valid length) says its sender accepts long cookie replies.
func longCookies(wk *wireKeys, dgram []byte) bool {
	var hdr [hsInnerHdr]byte
	copy(hdr[:], dgram[hsSeedLen:])
	xorMask(wk, dgram[:hsSeedLen], hdr[:])
	return hdr[0] == msgInit && binary.BigEndian.Uint32(hdr[5:9]) == initLongCookies
}

// openHandshake unmasks a datagram whose mac1 was already checked and
// parses the inner fields. The result does not alias dgram.
func openHandshake(wk *wireKeys, dgram []byte) (hsFields, error) {
	end := len(dgram) - hsTrailer
	in := make([]byte, end-hsSeedLen)
	copy(in, dgram[hsSeedLen:end])
	xorMask(wk, dgram[:hsSeedLen], in)
	n := int(binary.BigEndian.Uint16(in[9:11]))
	if n < 32 || hsInnerHdr+n > len(in) {
		return hsFields{}, ErrHandshake
	}
	f := hsFields{
		typ:      in[0],
		sender:   binary.BigEndian.Uint32(in[1:5]),
		receiver: binary.BigEndian.Uint32(in[5:9]),
		noise:    in[hsInnerHdr : hsInnerHdr+n],
	}
	f.noise[31] &= 0x7f
	return f, nil
}
